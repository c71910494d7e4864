/* Code generated from internal/settings/settings.go; DO NOT EDIT.
 * go test ./internal/settings -run TestCHeader -update writes it again.
 *
 * The settings the shim reads from its environment, with the defaults and
 * ranges of the one table; shim/config.c's setting_parse is the grammar
 * (internal/settings, package comment). */
#ifndef SDP_SHIM_SETTINGS_H
#define SDP_SHIM_SETTINGS_H

enum setting_kind { SETTING_INT, SETTING_BOOL, SETTING_ENUM, SETTING_TEXT, SETTING_FLAG };
enum setting_reader { READ_SHIM = 1, READ_ENGINE = 2, READ_SDPSTAT = 4 };

enum setting_id {
	SET_MODE, /* SDP_MODE */
	SET_PORT_OFFSET, /* SDP_PORT_OFFSET */
	SET_CONNECT_TIMEOUT, /* SDP_CONNECT_TIMEOUT */
	SET_LOG_LEVEL, /* SDP_LOG_LEVEL */
	SET_LOG_FILE, /* SDP_LOG_FILE */
	SET_STATS, /* SDP_STATS */
	SET_MARKERS, /* SDP_MARKERS */
	SET_CRC, /* SDP_CRC */
	SET_MARKER_SPACING, /* SDP_MARKER_SPACING */
	SET_BUF_SIZE, /* SDP_BUF_SIZE */
	SET_RECV_BUFS, /* SDP_RECV_BUFS */
	SET_FPDU_ALIGN, /* SDP_FPDU_ALIGN */
	SET_FLOW_CONTROL, /* SDP_FLOW_CONTROL */
	SET_ZCOPY_THRESHOLD, /* SDP_ZCOPY_THRESHOLD */
	SET_SHM, /* SDP_SHM */
	SET_SHORT_TCP, /* SDP_SHORT_TCP */
	SET_TRUST_REMOTE, /* SDP_TRUST_REMOTE */
	SET_MAX_CONNECTIONS, /* SDP_MAX_CONNECTIONS */
	SET_ENGINE, /* SDP_ENGINE */
	SET_CONFIG_FILE, /* SDP_CONFIG_FILE */
	SET_LIBSDP_CONFIG_FILE, /* LIBSDP_CONFIG_FILE */
	SET_SIMPLE_LIBSDP, /* SIMPLE_LIBSDP */
	SET_ALWAYS_USE_SDP, /* ALWAYS_USE_SDP */
	SET_COUNT
};

/* Defaults and ranges as constants, for static initialisers. */
#define SET_MODE_DEFAULT 0L
#define SET_PORT_OFFSET_DEFAULT 20000L
#define SET_PORT_OFFSET_MIN 1L
#define SET_PORT_OFFSET_MAX 64511L
#define SET_CONNECT_TIMEOUT_DEFAULT 2000L
#define SET_CONNECT_TIMEOUT_MIN 1L
#define SET_CONNECT_TIMEOUT_MAX 600000L
#define SET_LOG_LEVEL_DEFAULT 1L
#define SET_STATS_DEFAULT 0L
#define SET_MARKERS_DEFAULT 1L
#define SET_CRC_DEFAULT 1L
#define SET_MARKER_SPACING_DEFAULT 512L
#define SET_MARKER_SPACING_MIN 64L
#define SET_MARKER_SPACING_MAX 65532L
#define SET_BUF_SIZE_DEFAULT 65536L
#define SET_BUF_SIZE_MIN 1040L
#define SET_BUF_SIZE_MAX 1048576L
#define SET_RECV_BUFS_DEFAULT 16L
#define SET_RECV_BUFS_MIN 4L
#define SET_RECV_BUFS_MAX 1024L
#define SET_FPDU_ALIGN_DEFAULT 0L
#define SET_FLOW_CONTROL_DEFAULT 0L
#define SET_ZCOPY_THRESHOLD_DEFAULT 0L
#define SET_ZCOPY_THRESHOLD_MIN 0L
#define SET_ZCOPY_THRESHOLD_MAX LONG_MAX
#define SET_SHM_DEFAULT 1L
#define SET_SHORT_TCP_DEFAULT 1L
#define SET_MAX_CONNECTIONS_DEFAULT 0L
#define SET_MAX_CONNECTIONS_MIN 0L
#define SET_MAX_CONNECTIONS_MAX 65536L

struct setting {
	const char *name;
	enum setting_kind kind;
	int readers;         /* enum setting_reader, or'ed */
	long def, min, max;  /* def: the default's code */
	long multiple;       /* Int: the value is a multiple of this (0: any) */
	const char *values[4]; /* Enum: the words; a word's code is its index */
	int numeric;         /* Enum: a code written as a digit is accepted too */
	const char *grammar; /* for the warning: "... is not <grammar>; using <def_text>" */
	const char *def_text;
};

static const struct setting settings[SET_COUNT] = {
	[SET_MODE] = { "SDP_MODE", SETTING_ENUM, READ_SHIM,
		SET_MODE_DEFAULT, 0L, 0L, 0L,
		{ "both", "sdp", "tcp" }, 0, "one of both|sdp|tcp", "both" },
	[SET_PORT_OFFSET] = { "SDP_PORT_OFFSET", SETTING_INT, READ_SHIM | READ_SDPSTAT,
		SET_PORT_OFFSET_DEFAULT, 1L, 64511L, 0L,
		{ 0 }, 0, "a decimal integer from 1 to 64511", "20000" },
	[SET_CONNECT_TIMEOUT] = { "SDP_CONNECT_TIMEOUT", SETTING_INT, READ_SHIM,
		SET_CONNECT_TIMEOUT_DEFAULT, 1L, 600000L, 0L,
		{ 0 }, 0, "a decimal integer from 1 to 600000", "2000" },
	[SET_LOG_LEVEL] = { "SDP_LOG_LEVEL", SETTING_ENUM, READ_SHIM,
		SET_LOG_LEVEL_DEFAULT, 0L, 0L, 0L,
		{ "error", "warn", "info", "debug" }, 1, "one of error|warn|info|debug or 0-3", "warn" },
	[SET_LOG_FILE] = { "SDP_LOG_FILE", SETTING_TEXT, READ_SHIM,
		0, 0L, 0L, 0L,
		{ 0 }, 0, "text", "stderr" },
	[SET_STATS] = { "SDP_STATS", SETTING_BOOL, READ_SHIM,
		SET_STATS_DEFAULT, 0L, 0L, 0L,
		{ 0 }, 0, "0 or 1", "0" },
	[SET_MARKERS] = { "SDP_MARKERS", SETTING_BOOL, READ_SHIM,
		SET_MARKERS_DEFAULT, 0L, 0L, 0L,
		{ 0 }, 0, "0 or 1", "1" },
	[SET_CRC] = { "SDP_CRC", SETTING_BOOL, READ_SHIM,
		SET_CRC_DEFAULT, 0L, 0L, 0L,
		{ 0 }, 0, "0 or 1", "1" },
	[SET_MARKER_SPACING] = { "SDP_MARKER_SPACING", SETTING_INT, READ_SHIM,
		SET_MARKER_SPACING_DEFAULT, 64L, 65532L, 4L,
		{ 0 }, 0, "a multiple of 4 from 64 to 65532", "512" },
	[SET_BUF_SIZE] = { "SDP_BUF_SIZE", SETTING_INT, READ_SHIM,
		SET_BUF_SIZE_DEFAULT, 1040L, 1048576L, 0L,
		{ 0 }, 0, "a decimal integer from 1040 to 1048576", "65536" },
	[SET_RECV_BUFS] = { "SDP_RECV_BUFS", SETTING_INT, READ_SHIM,
		SET_RECV_BUFS_DEFAULT, 4L, 1024L, 0L,
		{ 0 }, 0, "a decimal integer from 4 to 1024", "16" },
	[SET_FPDU_ALIGN] = { "SDP_FPDU_ALIGN", SETTING_ENUM, READ_SHIM,
		SET_FPDU_ALIGN_DEFAULT, 0L, 0L, 0L,
		{ "off", "on", "auto" }, 1, "one of off|on|auto or 0-2", "off" },
	[SET_FLOW_CONTROL] = { "SDP_FLOW_CONTROL", SETTING_ENUM, READ_SHIM | READ_ENGINE,
		SET_FLOW_CONTROL_DEFAULT, 0L, 0L, 0L,
		{ "credit", "rdma", "nic", "transport" }, 0, "one of credit|rdma|nic|transport", "credit" },
	[SET_ZCOPY_THRESHOLD] = { "SDP_ZCOPY_THRESHOLD", SETTING_INT, READ_SHIM | READ_ENGINE,
		SET_ZCOPY_THRESHOLD_DEFAULT, 0L, LONG_MAX, 0L,
		{ 0 }, 0, "a decimal integer >= 0", "0" },
	[SET_SHM] = { "SDP_SHM", SETTING_BOOL, READ_SHIM | READ_ENGINE,
		SET_SHM_DEFAULT, 0L, 0L, 0L,
		{ 0 }, 0, "0 or 1", "1" },
	[SET_SHORT_TCP] = { "SDP_SHORT_TCP", SETTING_BOOL, READ_SHIM,
		SET_SHORT_TCP_DEFAULT, 0L, 0L, 0L,
		{ 0 }, 0, "0 or 1", "1" },
	[SET_TRUST_REMOTE] = { "SDP_TRUST_REMOTE", SETTING_TEXT, READ_SHIM,
		0, 0L, 0L, 0L,
		{ 0 }, 0, "text", "unset (no other host)" },
	[SET_MAX_CONNECTIONS] = { "SDP_MAX_CONNECTIONS", SETTING_INT, READ_SHIM,
		SET_MAX_CONNECTIONS_DEFAULT, 0L, 65536L, 0L,
		{ 0 }, 0, "a decimal integer from 0 to 65536", "0" },
	[SET_ENGINE] = { "SDP_ENGINE", SETTING_TEXT, READ_SHIM,
		0, 0L, 0L, 0L,
		{ 0 }, 0, "text", "next to `libsdp.so`" },
	[SET_CONFIG_FILE] = { "SDP_CONFIG_FILE", SETTING_TEXT, READ_SHIM,
		0, 0L, 0L, 0L,
		{ 0 }, 0, "text", "`/etc/libsdp.conf`" },
	[SET_LIBSDP_CONFIG_FILE] = { "LIBSDP_CONFIG_FILE", SETTING_TEXT, READ_SHIM,
		0, 0L, 0L, 0L,
		{ 0 }, 0, "text", "`/etc/libsdp.conf`" },
	[SET_SIMPLE_LIBSDP] = { "SIMPLE_LIBSDP", SETTING_FLAG, READ_SHIM,
		0, 0L, 0L, 0L,
		{ 0 }, 0, "text", "unset" },
	[SET_ALWAYS_USE_SDP] = { "ALWAYS_USE_SDP", SETTING_FLAG, READ_SHIM,
		0, 0L, 0L, 0L,
		{ 0 }, 0, "text", "unset" },
};

#endif
