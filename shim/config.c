/* shim/config.c: configuration: the environment, read once, and the log. */
#include "shim.h"

/* ---- configuration (environment, read once) ---------------------------- */

/* The defaults hold for a call that comes before the constructor (another
 * library's); read_config sets every field from shim/settings.h's table. */
struct shim_cfg cfg = {
	.mode = SET_MODE_DEFAULT,
	.port_offset = SET_PORT_OFFSET_DEFAULT,
	.connect_timeout_ms = SET_CONNECT_TIMEOUT_DEFAULT,
	.markers = SET_MARKERS_DEFAULT,
	.crc = SET_CRC_DEFAULT,
	.marker_spacing = SET_MARKER_SPACING_DEFAULT,
	.buf_size = SET_BUF_SIZE_DEFAULT,
	.recv_bufs = SET_RECV_BUFS_DEFAULT,
	.log_level = SET_LOG_LEVEL_DEFAULT,
	.stats = SET_STATS_DEFAULT,
	.fpdu_align = SET_FPDU_ALIGN_DEFAULT,
	.flow_control = SET_FLOW_CONTROL_DEFAULT,
	.zcopy_threshold = SET_ZCOPY_THRESHOLD_DEFAULT,
	.shared_memory = SET_SHM_DEFAULT,
	.short_tcp = SET_SHORT_TCP_DEFAULT,
	.max_conns = SET_MAX_CONNECTIONS_DEFAULT,
};

void logmsg(int level, const char *fmt, ...)
{
	if (level > cfg.log_level)
		return;
	char buf[512];
	int n = snprintf(buf, sizeof buf, "libsdp[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 2)
		n = sizeof buf - 2;
	if (cfg.log_syslog) {
		buf[n] = 0;
		syslog(level == 0 ? LOG_ERR : level == 1 ? LOG_WARNING : level == 2 ? LOG_INFO : LOG_DEBUG, "%s", buf);
		return;
	}
	buf[n++] = '\n';
	need_real();
	ssize_t w = real.write(cfg.log_fd, buf, n);
	(void)w;
}

/* shim_log is logmsg for the shim's other files (shim/uring.c). */
void shim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void shim_log(int level, const char *fmt, ...)
{
	if (level > cfg.log_level)
		return;
	char buf[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	logmsg(level, "%s", buf);
}

/* ---- settings: the table is shim/settings.h, the grammar is here --------
 *
 * internal/settings is the reference (its package comment has the grammar);
 * tests/settings_test.go gives both the same inputs. Every setting is read
 * once, when the process starts. */

static int is_space(char c) /* isspace in the C locale, whatever the program sets */
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* word_is says whether [b, e) is word, ASCII case ignored. */
static int word_is(const char *b, const char *e, const char *word)
{
	size_t n = strlen(word);
	return (size_t)(e - b) == n && !strncasecmp(b, word, n);
}

static int parse_int(const struct setting *s, const char *b, const char *e, long *out)
{
	char *end;
	errno = 0;
	long n = strtol(b, &end, 10);
	if (end == b || end != e || errno || n < s->min || n > s->max || (s->multiple > 1 && n % s->multiple))
		return -1;
	*out = n;
	return 0;
}

static int parse_bool(const char *b, const char *e, long *out)
{
	static const char *const words[2][4] = { { "0", "off", "no", "false" }, { "1", "on", "yes", "true" } };
	for (int code = 0; code < 2; code++)
		for (int i = 0; i < 4; i++)
			if (word_is(b, e, words[code][i])) {
				*out = code;
				return 0;
			}
	return -1;
}

static int parse_enum(const struct setting *s, const char *b, const char *e, long *out)
{
	int n = 0;
	for (; n < (int)(sizeof s->values / sizeof s->values[0]) && s->values[n]; n++)
		if (word_is(b, e, s->values[n])) {
			*out = n;
			return 0;
		}
	if (s->numeric && e - b == 1 && *b >= '0' && *b - '0' < n) {
		*out = *b - '0';
		return 0;
	}
	return -1;
}

/* setting_parse reads v, spaces around it ignored, into its code (Int: the
 * number, Bool: 0 or 1, Enum: the word's index); -1: it does not fit. */
static int setting_parse(const struct setting *s, const char *v, long *out)
{
	while (is_space(*v))
		v++;
	const char *e = v + strlen(v);
	while (e > v && is_space(e[-1]))
		e--;
	switch (s->kind) {
	case SETTING_INT:
		return parse_int(s, v, e, out);
	case SETTING_BOOL:
		return parse_bool(v, e, out);
	case SETTING_ENUM:
		return parse_enum(s, v, e, out);
	default:
		return -1;
	}
}

/* setting is the code of a setting read from the environment; unset or
 * empty, or a value that does not fit (said in the log), its default. The
 * engine reports a bad value of a setting it reads too; the shim then says
 * it at debug level only, for the comparison of the two. */
long setting(enum setting_id id)
{
	const struct setting *s = &settings[id];
	const char *v = getenv(s->name);
	long n;
	if (!v || !*v)
		return s->def;
	if (setting_parse(s, v, &n) == 0)
		return n;
	int shared = s->readers & READ_ENGINE;
	logmsg(shared ? 3 : 0, "%s=\"%s\" is not %s; using %s%s", s->name, v, s->grammar, s->def_text,
	       shared ? " (shim)" : "");
	return s->def;
}

/* setting_text is a Text or Flag setting as it is (NULL: unset). */
const char *setting_text(enum setting_id id)
{
	return getenv(settings[id].name);
}

/* log_settings writes, at debug level, what the shim read: one line
 * "settings (shim): NAME=value ...", as internal/settings.Line writes it. */
static void log_settings(const long v[SET_COUNT])
{
	char line[480];
	size_t o = 0;
	for (int i = 0; i < SET_COUNT && o < sizeof line; i++) {
		const struct setting *s = &settings[i];
		if (s->kind == SETTING_ENUM)
			o += snprintf(line + o, sizeof line - o, "%s%s=%s", o ? " " : "", s->name, s->values[v[i]]);
		else if (s->kind == SETTING_INT || s->kind == SETTING_BOOL)
			o += snprintf(line + o, sizeof line - o, "%s%s=%ld", o ? " " : "", s->name, v[i]);
	}
	logmsg(3, "settings (shim): %s", line);
}

/* open_log_path opens the log file: %p becomes the process id; links are
 * not followed and the file is private to the user. */
void open_log_path(const char *path)
{
	char buf[PATH_MAX];
	size_t o = 0;
	for (const char *p = path; *p && o < sizeof buf - 16; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			o += snprintf(buf + o, sizeof buf - o, "%d", (int)getpid());
			p++;
		} else {
			buf[o++] = *p;
		}
	}
	buf[o] = 0;
	int fd = open(buf, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		logmsg(0, "cannot open log file %s: %s; logging to stderr", buf, strerror(errno));
		return;
	}
	/* Keep the log away from the low descriptors applications use. */
	need_real();
	int hi = real.fcntl(fd, F_DUPFD_CLOEXEC, 900);
	if (hi >= 0) {
		real.close(fd);
		fd = hi;
	}
	cfg.log_fd = fd;
	cfg.log_syslog = 0;
	keep_open(fd); /* a program that closes what it does not know keeps its log */
}

static void open_log(void)
{
	const char *path = setting_text(SET_LOG_FILE);
	if (path && *path)
		open_log_path(path);
}

/* shim_keep_fd keeps a descriptor of the shim's own (shim/trust.c's
 * sock_diag socket, shim/uring_ops.c's ring) out of the application's way:
 * a high descriptor that its close() leaves open. */
int shim_keep_fd(int fd)
{
	fd = move_high(fd);
	keep_open(fd);
	return fd;
}

void read_config(void)
{
	long v[SET_COUNT] = { 0 };
	cfg.log_level = v[SET_LOG_LEVEL] = setting(SET_LOG_LEVEL);
	open_log(); /* the other settings' warnings go to the log file */
	for (int i = 0; i < SET_COUNT; i++)
		if (i != SET_LOG_LEVEL && settings[i].kind <= SETTING_ENUM)
			v[i] = setting(i);
	cfg.mode = v[SET_MODE];
	cfg.port_offset = v[SET_PORT_OFFSET];
	cfg.connect_timeout_ms = v[SET_CONNECT_TIMEOUT];
	cfg.markers = v[SET_MARKERS];
	cfg.crc = v[SET_CRC];
	cfg.marker_spacing = v[SET_MARKER_SPACING];
	cfg.buf_size = v[SET_BUF_SIZE];
	cfg.recv_bufs = v[SET_RECV_BUFS];
	cfg.stats = v[SET_STATS];
	cfg.fpdu_align = v[SET_FPDU_ALIGN];
	cfg.flow_control = v[SET_FLOW_CONTROL];
	cfg.zcopy_threshold = v[SET_ZCOPY_THRESHOLD];
	cfg.shared_memory = v[SET_SHM];
	cfg.short_tcp = v[SET_SHORT_TCP];
	cfg.max_conns = v[SET_MAX_CONNECTIONS];
	if (cfg.log_level >= 3)
		log_settings(v);
	char err[200];
	if (trust_init(setting_text(SET_TRUST_REMOTE), err, sizeof err) < 0)
		logmsg(0, "%s", err);
	trust_keep(shim_keep_fd);
	if (setting_text(SET_SIMPLE_LIBSDP) || setting_text(SET_ALWAYS_USE_SDP)) {
		cfg.mode = MODE_SDP; /* OFED's switches: SDP for everything, no rules */
		return;
	}
	const char *conf = setting_text(SET_CONFIG_FILE);
	if (!conf || !*conf)
		conf = setting_text(SET_LIBSDP_CONFIG_FILE);
	load_rules(conf && *conf ? conf : "/etc/libsdp.conf");
	/* An explicit SDP_LOG_* in the environment wins over the file's log. */
	const char *log = setting_text(SET_LOG_FILE);
	if (log && *log)
		open_log();
}
