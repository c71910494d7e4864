/* libsdp.so: the LD_PRELOAD shim.
 *
 * Every hook starts with the cheap test "is this descriptor one of ours?"
 * (a table look-up) and otherwise calls the real libc function. Ours are the
 * AF_INET/AF_INET6 stream sockets; of those, only connections that reach an
 * SDP peer are handed to the Go engine (build/libsdp-engine.so), which is
 * loaded with dlopen the first time a process does I/O on one. Listening,
 * accepting and connecting are plain kernel calls made here, so a server
 * that forks after listen() or accept() never carries a Go runtime across
 * fork: a Go runtime does not survive fork() without exec (only the forking
 * thread exists in the child, which hangs on its first goroutine, sleep or
 * garbage collection). README.md ("Known limits") and docs/PROTOCOL.md §2
 * say what a forked child may do with a connection.
 *
 * Finding the peer: an application listener on port P gets a second, hidden
 * listener on the mapped SDP port (P + SDP_PORT_OFFSET, wrapped into
 * 1024..65535). A connect() to P goes first to the mapped port: refused, a
 * foreign banner or silence falls back to plain TCP on P. On an SDP port
 * the accepting side writes the MPA Request (with the SDP Hello) at once and
 * the connecting side answers only after validating it.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dlfcn.h>
#include <fnmatch.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <linux/close_range.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <linux/sockios.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "preload/abi.h"
#include "shim/raw.h"
#include "shim/uring.h"
#include "shim/trust.h"
#include "shim/settings.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- the real libc functions ------------------------------------------ */

static struct {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*close)(int);
	int (*shutdown)(int, int);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	int (*dup)(int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
} real;

static pthread_once_t real_once = PTHREAD_ONCE_INIT;

#define RESOLVE(name) real.name = dlsym(RTLD_NEXT, #name)
static void resolve_real(void)
{
	RESOLVE(socket); RESOLVE(bind); RESOLVE(listen); RESOLVE(accept);
	RESOLVE(accept4); RESOLVE(connect); RESOLVE(read); RESOLVE(write);
	RESOLVE(readv); RESOLVE(writev); RESOLVE(recv); RESOLVE(recvfrom);
	RESOLVE(recvmsg); RESOLVE(send); RESOLVE(sendto); RESOLVE(sendmsg);
	RESOLVE(close); RESOLVE(shutdown); RESOLVE(getsockname);
	RESOLVE(getpeername); RESOLVE(getsockopt); RESOLVE(setsockopt); RESOLVE(dup2); RESOLVE(dup3);
	RESOLVE(poll); RESOLVE(ppoll); RESOLVE(select); RESOLVE(pselect);
	RESOLVE(epoll_create); RESOLVE(epoll_create1); RESOLVE(epoll_ctl);
	RESOLVE(epoll_wait); RESOLVE(epoll_pwait);
	RESOLVE(dup); RESOLVE(fcntl); RESOLVE(ioctl); RESOLVE(sendfile);
}

static inline void need_real(void)
{
	if (__builtin_expect(real.close == NULL, 0))
		pthread_once(&real_once, resolve_real);
}

/* ---- configuration (environment, read once) ---------------------------- */

enum { MODE_BOTH, MODE_SDP, MODE_TCP }; /* SDP_MODE's codes: the order of its words */

/* The defaults hold for a call that comes before the constructor (another
 * library's); read_config sets every field from shim/settings.h's table. */
static struct {
	int mode;
	int port_offset;
	int connect_timeout_ms;
	int markers, crc, marker_spacing;
	int buf_size, recv_bufs;
	int log_level;
	int log_fd;
	int log_syslog;
	int stats;
	int fpdu_align;
	int flow_control; /* asked for in the Hello; its code there */
	long zcopy_threshold;
	int max_conns;
} cfg = {
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
	.max_conns = SET_MAX_CONNECTIONS_DEFAULT,
};

static void logmsg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logmsg(int level, const char *fmt, ...)
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
static long setting(enum setting_id id)
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
static const char *setting_text(enum setting_id id)
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

static void keep_open(int fd);

/* open_log_path opens the log file: %p becomes the process id; links are
 * not followed and the file is private to the user. */
static void open_log_path(const char *path)
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

static void load_rules(const char *path);

static int move_high(int fd);

/* shim_keep_fd keeps a descriptor of the shim's own (shim/trust.c's
 * sock_diag socket, shim/uring_ops.c's ring) out of the application's way:
 * a high descriptor that its close() leaves open. */
int shim_keep_fd(int fd)
{
	fd = move_high(fd);
	keep_open(fd);
	return fd;
}

static void read_config(void)
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


/* ---- the descriptor table --------------------------------------------- */

enum kind {
	K_NONE = 0,   /* not ours */
	K_CAND,       /* an AF_INET/6 stream socket, nothing decided yet */
	K_TCP,        /* plain TCP, decided (reason says why) */
	K_LISTEN,     /* a listener with a hidden SDP listener */
	K_CONNECTING, /* non-blocking connect to the mapped SDP port in progress */
	K_ACTIVE,     /* connected to an SDP port; engine not attached yet */
	K_PASSIVE,    /* accepted on an SDP port, MPA Request sent; not attached */
	K_SDP,        /* the engine has it */
	K_EPOLL,      /* an epoll instance (see the epoll section) */
	K_ENGINE,     /* the engine's own: close() leaves it open */
	K_HIDDEN,     /* a hidden SDP listener: close() leaves it open */
};

#define REQ_MAX 128

struct epset;

struct fdent {
	_Atomic int kind;
	_Atomic uint32_t gen; /* changes whenever the descriptor is reused */
	struct epset *ep;     /* K_EPOLL: SDP descriptors registered in it */
	int family;
	int hidden;           /* K_LISTEN: the SDP listener */
	int reason;           /* K_TCP: enum sdp_reason */
	int passive;          /* accepted (getsockname shows app_port) */
	uint16_t app_port;    /* the port the application sees */
	pid_t engine_pid;     /* K_SDP: process whose engine owns it */
	struct sockaddr_storage dst; /* connect: the application's address */
	socklen_t dstlen;
	struct sockaddr_storage bound; /* bind: to repeat on a fresh socket */
	socklen_t boundlen;
	int reqlen;
	int shared;           /* dup'ed or inherited before use: may share its socket */
	int sdp_only;         /* a rule says sdp: no TCP fallback, no TCP clients */
	int so_error;         /* a failed non-blocking connect, for SO_ERROR */
	int dupped;           /* another descriptor may refer to the same socket */
	_Atomic pid_t last_tid;  /* the thread that last waited on it */
	_Atomic int threads;     /* more than one thread has waited on it */
	_Atomic uint32_t wfull;  /* non-blocking sends that found the transport full */
	_Atomic int nb;          /* O_NONBLOCK as set or seen through it; -1: ask the kernel */
	_Atomic unsigned nb_forks; /* forks when nb was learnt: after a fork another process shares it */
	unsigned born_forks;     /* forks when the entry was made: one since means a child shares it */
	int at_eof;              /* accepted on the SDP port already closed by the peer: plain, at EOF */
	int patient;             /* its SDP port is proved P's owner's: no SDP_CONNECT_TIMEOUT */
	unsigned owner_uid;      /* patient: the uid of P's listener, whom the connection must reach */
	int rcvbuf, sndbuf;      /* SO_RCVBUF, SO_SNDBUF as the application set them; 0: never */
	_Atomic int reset_told;  /* ECONNRESET was reported: later calls see EPIPE or end of stream */
	_Atomic int sk_err;      /* K_TCP: the kernel's pending error, which the shim or the engine read
				  * for it (a reset before the handshake): the next call reports it once */
	_Atomic int reconnecting; /* K_TCP: the fallback's connect to P, for a connection the
				   * application saw established, is in progress (settle_reconnect) */
	int nodelay, cork;       /* the application's TCP_NODELAY and TCP_CORK; -1: never set */
	int reuse_app;           /* K_LISTEN: SO_REUSEADDR as the application set it (its twin has 1) */
	int reuse_shown;         /* accepted on a twin: its listener's reuse_app + 1; 0: the kernel's */
	int lowat;               /* SO_RCVLOWAT, kept here for SDP (set_rcvlowat); 1: the default */
	uint8_t req[REQ_MAX];
};

static _Atomic unsigned n_forks; /* a socket open before a fork is shared with the child */

/* Counters for the statistics line. */
static _Atomic uint64_t n_tcp_conns, n_reasons[SDP_REASON_MAX], n_sockets;

#define FD_MAX 65536
_Static_assert(SET_MAX_CONNECTIONS_MAX == FD_MAX, "SDP_MAX_CONNECTIONS goes up to the table's size");
static struct fdent *_Atomic fdtab[FD_MAX];
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;

/* ours returns the entry of fd when it is one of our sockets. */
static inline struct fdent *ours(int fd)
{
	if ((unsigned)fd >= FD_MAX)
		return NULL;
	struct fdent *e = atomic_load_explicit(&fdtab[fd], memory_order_acquire);
	if (!e || atomic_load_explicit(&e->kind, memory_order_relaxed) == K_NONE)
		return NULL;
	return e;
}

/* Entries are never freed, only reset, so a racing reader never sees freed
 * memory. */
static struct fdent *entry_new(int fd, int kind, int family)
{
	if ((unsigned)fd >= FD_MAX)
		return NULL;
	struct fdent *e = atomic_load(&fdtab[fd]);
	if (!e) {
		pthread_mutex_lock(&tab_mu);
		e = atomic_load(&fdtab[fd]);
		if (!e) {
			e = calloc(1, sizeof *e);
			if (e)
				atomic_store(&fdtab[fd], e);
		}
		pthread_mutex_unlock(&tab_mu);
		if (!e)
			return NULL;
	}
	atomic_store(&e->kind, K_NONE);
	atomic_fetch_add(&e->gen, 1);
	if (kind != K_EPOLL && kind != K_ENGINE && kind != K_HIDDEN)
		atomic_fetch_add(&n_sockets, 1);
	e->family = family;
	e->hidden = -1;
	e->reason = 0;
	e->passive = 0;
	e->app_port = 0;
	e->engine_pid = 0;
	e->dstlen = 0;
	e->boundlen = 0;
	e->reqlen = 0;
	e->shared = 0;
	e->born_forks = atomic_load(&n_forks);
	e->at_eof = 0;
	e->patient = 0;
	e->rcvbuf = e->sndbuf = 0;
	atomic_store(&e->reset_told, 0);
	atomic_store(&e->sk_err, 0);
	atomic_store(&e->reconnecting, 0);
	e->sdp_only = 0;
	e->so_error = 0;
	e->dupped = 0;
	atomic_store(&e->nb, -1);
	e->nodelay = e->cork = -1;
	e->reuse_app = e->reuse_shown = 0;
	e->lowat = 1;
	atomic_store(&e->last_tid, 0);
	atomic_store(&e->threads, 0);
	atomic_store_explicit(&e->kind, kind, memory_order_release);
	return e;
}

/* keep_open marks a descriptor of the shim's own (the log, a hidden
 * listener): close() by the application leaves it open. */
static void keep_open(int fd)
{
	entry_new(fd, K_HIDDEN, 0);
}

static void entry_reset(int fd)
{
	if ((unsigned)fd >= FD_MAX)
		return;
	struct fdent *e = atomic_load(&fdtab[fd]);
	if (e) {
		atomic_store(&e->kind, K_NONE);
		atomic_fetch_add(&e->gen, 1);
	}
}

/* ---- counters ------------------------------------------------------------ */


static const char *reason_name(int r)
{
	static const char *names[] = {
		"none", "timeout", "foreign", "version", "refused", "rule",
		"plain-peer", "after-fork", "engine-unavailable", "cached", "sdp-port-busy",
		"resource-limit", "untrusted-sdp-port", "untrusted-remote", "closed-before-handshake",
	};
	return (r >= 0 && r < SDP_REASON_MAX) ? names[r] : "unknown";
}

static void fmt_addr(const struct sockaddr *sa, char *out, size_t n)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip);
		port = ntohs(s->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)sa;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof ip);
		port = ntohs(s->sin6_port);
	}
	snprintf(out, n, "%s:%d", ip, port);
}

/* mark_tcp records that fd's connection runs over plain TCP, and why. */
static void mark_tcp(int fd, struct fdent *e, int reason)
{
	atomic_store(&e->kind, K_TCP);
	e->reason = reason;
	/* A connection its peer closed before the handshake carried nothing:
	 * no connection of either transport in the counts (its client counts
	 * none either), only its reason. */
	if (reason != SDP_REASON_PEER_CLOSED)
		atomic_fetch_add(&n_tcp_conns, 1);
	atomic_fetch_add(&n_reasons[reason], 1);
	if (cfg.log_level >= 2) {
		char a[80] = "";
		if (e->dstlen)
			fmt_addr((struct sockaddr *)&e->dst, a, sizeof a);
		logmsg(2, "fd %d transport=tcp reason=%s %s", fd, reason_name(reason), a);
	}
}


/* ---- the socket table for sdpstat ---------------------------------------- */

static const char *kind_name(int k)
{
	static const char *names[] = { "none", "socket", "tcp", "listen", "connecting", "connected",
				       "accepted", "sdp", "epoll", "engine", "hidden" };
	return k >= 0 && k <= K_HIDDEN ? names[k] : "?";
}

static int sdp_port(int port);

/* shim_snapshot writes a line per socket the table knows; the engine
 * publishes it with its own per-connection counters. */
static int shim_snapshot(char *buf, int len)
{
	int o = 0;
	if (len <= 0)
		return 0;
	buf[0] = 0;
	for (int fd = 0; fd < FD_MAX && o < len - 256; fd++) {
		struct fdent *e = atomic_load_explicit(&fdtab[fd], memory_order_acquire);
		if (!e)
			continue;
		int k = atomic_load(&e->kind);
		if (k == K_NONE || k == K_EPOLL || k == K_ENGINE || k == K_HIDDEN)
			continue;
		struct sockaddr_storage l, p;
		socklen_t ll = sizeof l, pl = sizeof p;
		char ls[80] = "-", ps[80] = "-";
		if (getsockname(fd, (struct sockaddr *)&l, &ll) == 0)
			fmt_addr((struct sockaddr *)&l, ls, sizeof ls);
		if (getpeername(fd, (struct sockaddr *)&p, &pl) == 0)
			fmt_addr((struct sockaddr *)&p, ps, sizeof ps);
		const char *transport = k == K_TCP ? "tcp" : k == K_LISTEN ? "tcp+sdp" : k == K_CAND ? "-" : "sdp";
		o += snprintf(buf + o, len - o, "fd=%d kind=%s transport=%s reason=%s local=%s remote=%s sdp_port=%d\n",
			      fd, kind_name(k), transport, k == K_TCP ? reason_name(e->reason) : "-", ls, ps,
			      k == K_LISTEN ? sdp_port(e->app_port) : 0);
	}
	if (o >= len)
		o = len - 1;
	buf[o] = 0;
	return o;
}

/* shim_own_fd keeps the application's close() away from the engine's own
 * descriptors (eventfds, sockets it still finishes after close). */
static void shim_own_fd(int fd, int own)
{
	if (own)
		entry_new(fd, K_ENGINE, 0);
	else
		entry_reset(fd);
}

/* ---- the engine ------------------------------------------------------ */

/* Calls of the application into the engine go through eng; a function
 * added here gets a counting wrapper in urg_wrap (SIGURG). */

static struct {
	sdp_engine_init_fn init;
	sdp_attach_fn attach;
	sdp_sendv_fn sendv;
	sdp_sendv_flags_fn sendv_flags; /* optional: MSG_MORE and zero copy */
	sdp_recvv_fn recvv;
	sdp_poll_fn poll;
	sdp_shutdown_fn shutdown;
	sdp_close_fn close;
	sdp_stats_fn stats;
	sdp_dup_fn dup;
	sdp_query_fn query;
	sdp_take_early_fn take_early;
	sdp_engine_exit_fn exit;
	sdp_recv_cancel_fn recv_cancel; /* optional: Write ZCopy */
	sdp_send_cancel_fn send_cancel; /* optional: Read ZCopy */
	sdp_set_buffers_fn set_buffers; /* optional: SO_SNDBUF, SO_RCVBUF */
} eng;

static pid_t engine_pid;   /* process that loaded the engine, 0: none */
static int engine_failed;
static pthread_mutex_t engine_mu = PTHREAD_MUTEX_INITIALIZER;

static int engine_path(char *out, size_t n)
{
	const char *env = setting_text(SET_ENGINE);
	if (env && *env) {
		snprintf(out, n, "%s", env);
		return 0;
	}
	Dl_info info;
	if (!dladdr((void *)engine_path, &info) || !info.dli_fname)
		return -1;
	const char *slash = strrchr(info.dli_fname, '/');
	if (!slash)
		snprintf(out, n, "./libsdp-engine.so");
	else
		snprintf(out, n, "%.*s/libsdp-engine.so", (int)(slash - info.dli_fname), info.dli_fname);
	return 0;
}

/* engine_fd is the engine's file, opened when the process made a listener:
 * a server that drops privileges after listen() (nginx's, PostgreSQL's and
 * memcached's workers) may no longer reach the engine's path (a build tree
 * in a home directory of mode 0700), but loads it through this descriptor. */
static int engine_fd = -1;

static void hold_engine(void)
{
	pthread_mutex_lock(&engine_mu);
	char path[PATH_MAX];
	if (engine_fd < 0 && engine_pid != getpid() && engine_path(path, sizeof path) == 0) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			engine_fd = move_high(fd);
			keep_open(engine_fd);
		}
	}
	pthread_mutex_unlock(&engine_mu);
}

/* open_fds records which descriptors are open now. */
static void open_fds(uint64_t *set)
{
	memset(set, 0, FD_MAX / 8);
	int d = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return;
	char buf[4096];
	for (;;) {
		long n = syscall(SYS_getdents64, d, buf, sizeof buf);
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; } *de = (void *)(buf + off);
			int fd = atoi(de->name);
			if (de->name[0] >= '0' && de->name[0] <= '9' && fd < FD_MAX)
				set[fd / 64] |= 1ull << (fd % 64);
			off += de->reclen;
		}
	}
	real.close(d);
}

/* protect_new_fds marks the descriptors the Go runtime opened while it
 * started and keeps (the cgroup files it re-reads, its poller's epoll and
 * eventfd, which the engine starts during its init): an application that
 * closes every descriptor it does not know must not take them away, or the
 * runtime would abort the whole program. */
static void protect_new_fds(const uint64_t *before)
{
	uint64_t after[FD_MAX / 64];
	open_fds(after);
	for (int i = 0; i < FD_MAX / 64; i++) {
		uint64_t added = after[i] & ~before[i];
		for (int b = 0; added; b++, added >>= 1) {
			if (!(added & 1) || ours(i * 64 + b))
				continue;
			/* Only what is surely the runtime's: another thread of the
			 * application may have opened descriptors meanwhile. */
			char link[64], target[128];
			snprintf(link, sizeof link, "/proc/self/fd/%d", i * 64 + b);
			ssize_t n = readlink(link, target, sizeof target - 1);
			if (n > 0 && (target[n] = 0, !strncmp(target, "/sys/fs/cgroup/", 15) ||
				      !strcmp(target, "anon_inode:[eventpoll]") || !strcmp(target, "anon_inode:[eventfd]")))
				entry_new(i * 64 + b, K_ENGINE, 0);
		}
	}
}

/* my_pid is getpid() without the system call, for the data path's "is this
 * connection driven by this process's engine?" test. It is set at load and
 * after fork (pthread_atfork); a vfork child, which shares it with its
 * parent, may only exec or _exit and makes no data calls. */
static pid_t cached_pid;
static inline pid_t my_pid(void)
{
	return cached_pid ? cached_pid : getpid();
}

/* shares_parents_memory: this is a child running in its parent's memory
 * (vfork, as Python's subprocess and posix_spawn use, until it execs): the
 * table and the engine are the parent's, whose descriptors stay open
 * whatever the child closes or replaces, so the child leaves them alone.
 * (A child made by a raw clone without fork's handlers is taken for one:
 * its own copy of the table goes stale, which harms nothing.) */
static inline int shares_parents_memory(void)
{
	return cached_pid && getpid() != cached_pid;
}

/* engine_usable says whether this process may use SDP: a process whose
 * parent loaded the engine inherits a Go runtime that did not survive fork. */
static inline int engine_usable_by(pid_t me)
{
	return !engine_failed && (engine_pid == 0 || engine_pid == me);
}

static inline int engine_usable(void)
{
	return engine_usable_by(getpid());
}

/* ---- SIGURG for urgent data ---------------------------------------------
 *
 * When a new urgent mark arrives the kernel signals a TCP socket's owner
 * (F_SETOWN, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP; these reach the kernel
 * socket under an SDP descriptor too). The engine finds the mark with the
 * connection locked and only notes it here (shim_urgent); the signal is
 * sent once nothing is locked, and so that the application's handler never
 * runs inside Go code (on a goroutine stack, or calling back into the
 * engine from there):
 *
 *  - an application thread leaving an engine call (the mark came in its
 *    call) signals itself when the owner is its process or itself and it
 *    does not block SIGURG: the handler runs before the call returns;
 *  - otherwise (async progress, or the thread cannot take it) the signal
 *    goes out while no application thread is inside the engine, and threads
 *    that would enter wait (urg_gate) until the signal was taken, which
 *    they can do themselves in C. Go's threads block SIGURG.
 *
 * Every engine call of the application goes through the eng_urg wrappers
 * (urg_enter, urg_leave), which count the threads inside. */
#define URG_SLOTS 64
static _Atomic int urg_slot[URG_SLOTS]; /* fd + 1 of a noted mark, 0: free */
static _Atomic int urg_noted;           /* marks noted, not yet signalled */
static _Atomic int urg_inside;          /* application threads inside the engine */
static _Atomic int urg_gate;            /* a signal is on its way: stay out */

#define URG_WAIT_NS (10 * 1000000LL) /* bounds the wait for a signal to be taken */

static int64_t urg_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void urg_note(int fd)
{
	for (int i = 0; i < URG_SLOTS; i++) {
		int z = 0;
		if (atomic_compare_exchange_strong(&urg_slot[i], &z, fd + 1)) {
			atomic_fetch_add(&urg_noted, 1);
			return;
		}
	}
	/* More marks waiting than slots: their signals would merge anyway. */
}

/* urg_pending reads whether SIGURG is pending from /proc: in the process's
 * shared set (tid 0) or in one thread's own set. */
static int urg_pending(pid_t tid)
{
	char path[64];
	if (tid)
		snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
	else
		snprintf(path, sizeof path, "/proc/self/status");
	const char *key = tid ? "SigPnd:" : "ShdPnd:";
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096];
	ssize_t n = syscall(SYS_read, fd, buf, sizeof buf - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strstr(buf, key);
	if (!p)
		return 0;
	unsigned long long m = strtoull(p + strlen(key), NULL, 16);
	return (m >> (SIGURG - 1)) & 1;
}

static __thread int urg_gating; /* this thread holds urg_gate */
static __thread int urg_hold;   /* this thread holds a lock of the shim's */
static _Atomic int64_t urg_gate_at; /* when urg_gate was last taken */
static _Atomic unsigned urg_sent; /* SIGURGs sent to this process */

/* urg_restart says whether a wait interrupted by a signal may go on
 * because the signal was a SIGURG of ours (sent since urg_sent was seen)
 * whose handler has SA_RESTART: the kernel restarts a TCP read then. */
static int urg_restart(unsigned seen)
{
	struct sigaction sa;
	return atomic_load(&urg_sent) != seen && sigaction(SIGURG, NULL, &sa) == 0 && (sa.sa_flags & SA_RESTART);
}

/* urg_claim takes slot i if it still holds fd1. */
static int urg_claim(int i, int fd1)
{
	if (!atomic_compare_exchange_strong(&urg_slot[i], &fd1, 0))
		return 0;
	atomic_fetch_sub(&urg_noted, 1);
	return 1;
}

/* urg_signal sends SIGURG for the mark in slot i (fd1 = fd + 1). self: the
 * caller is an application thread outside the engine. It returns 0, the
 * mark left noted, when application threads are inside the engine: they
 * send it on their way out. */
static int urg_signal(int i, int fd1, int self)
{
	struct f_owner_ex o = { 0 };
	if (syscall(SYS_fcntl, fd1 - 1, F_GETOWN_EX, &o) != 0 || o.pid <= 0) {
		urg_claim(i, fd1); /* nobody to tell */
		return 1;
	}
	pid_t me = getpid(), tid = (pid_t)syscall(SYS_gettid);
	int here = (o.type == F_OWNER_PID && o.pid == me) || (o.type == F_OWNER_PGRP && o.pid == getpgrp()) ||
		   (o.type == F_OWNER_TID && syscall(SYS_tgkill, me, o.pid, 0) == 0);
	sigset_t cur;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	if (self && !sigismember(&cur, SIGURG) &&
	    ((o.type == F_OWNER_PID && o.pid == me) || (o.type == F_OWNER_TID && o.pid == tid))) {
		/* This thread takes it as tgkill returns, in C. */
		if (urg_claim(i, fd1)) {
			atomic_fetch_add(&urg_sent, 1);
			syscall(SYS_tgkill, me, tid, SIGURG);
		}
		return 1;
	}
	if (!here) { /* only other processes */
		if (urg_claim(i, fd1)) {
			if (o.type == F_OWNER_TID)
				syscall(SYS_tkill, o.pid, SIGURG);
			else
				kill(o.type == F_OWNER_PGRP ? -o.pid : o.pid, SIGURG);
		}
		return 1;
	}
	/* A thread of this process, chosen by the kernel or named by the owner,
	 * takes it: keep application threads out of Go until it has. */
	atomic_fetch_add(&urg_gate, 1);
	atomic_store(&urg_gate_at, urg_now_ns());
	if (atomic_load(&urg_inside) > 0) {
		atomic_fetch_sub(&urg_gate, 1);
		return 0;
	}
	if (urg_claim(i, fd1)) {
		pid_t pt = o.type == F_OWNER_TID ? o.pid : 0;
		/* One already pending (every thread blocks SIGURG) merges with
		 * this one: nobody takes it soon, nothing to wait for. */
		int wait = !urg_pending(pt);
		int was = urg_gating;
		urg_gating = 1; /* a handler run by this thread may call the engine */
		atomic_fetch_add(&urg_sent, 1);
		if (o.type == F_OWNER_TID)
			syscall(SYS_tgkill, me, o.pid, SIGURG);
		else
			kill(o.type == F_OWNER_PGRP ? -o.pid : o.pid, SIGURG);
		for (int64_t end = urg_now_ns() + URG_WAIT_NS; wait && urg_pending(pt) && urg_now_ns() < end;)
			sched_yield();
		urg_gating = was;
	}
	atomic_fetch_sub(&urg_gate, 1);
	return 1;
}

/* urg_flush signals the noted marks. */
static int urg_flush(int self)
{
	int done = 1;
	for (int i = 0; i < URG_SLOTS && atomic_load(&urg_noted) > 0; i++) {
		int fd1 = atomic_load(&urg_slot[i]);
		if (fd1 && !urg_signal(i, fd1, self))
			done = 0;
	}
	return done;
}

/* shim_urgent is the engine's callback (struct sdp_engine_config). fd >= 0:
 * note a new mark on fd; the result says whether an engine thread must call
 * again with fd = -1 (no application thread is inside to signal it on its
 * way out). fd = -1: signal the noted marks from an engine thread. */
static int shim_urgent(int fd)
{
	if (fd < 0)
		return urg_flush(0);
	urg_note(fd);
	return atomic_load(&urg_inside) == 0;
}

/* urg_wait_gate waits while a signal is on its way; it may be for this
 * thread, which takes it here, in C (sched_yield returns through the
 * kernel's signal delivery). */
static void urg_wait_gate(int64_t end)
{
	while (atomic_load(&urg_gate) && urg_now_ns() < end) {
		/* A holder whose thread ran the handler, which left by
		 * siglongjmp, never lets go: it is taken for gone. */
		if (urg_now_ns() - atomic_load(&urg_gate_at) > 4 * URG_WAIT_NS) {
			atomic_store(&urg_gate, 0);
			break;
		}
		sched_yield();
	}
}

static inline void urg_enter(void)
{
	atomic_fetch_add(&urg_inside, 1);
	if (!atomic_load(&urg_gate)) {
		urg_gating = 0; /* left over by a handler's siglongjmp, if set */
		return;
	}
	if (urg_gating)
		return;
	int64_t end = urg_now_ns() + 2 * URG_WAIT_NS;
	do {
		atomic_fetch_sub(&urg_inside, 1);
		urg_wait_gate(end);
		atomic_fetch_add(&urg_inside, 1);
	} while (atomic_load(&urg_gate) && urg_now_ns() < end);
}

/* urg_deliver sends the signals for the noted marks; if another thread is
 * sending one, it returns once that was taken: a mark the caller's call
 * saw has been signalled when the call returns, as on TCP. */
static void urg_deliver(void)
{
	if (atomic_load(&urg_noted) > 0)
		urg_flush(1);
	if (atomic_load(&urg_gate) && !urg_gating)
		urg_wait_gate(urg_now_ns() + 2 * URG_WAIT_NS);
}

/* urg_leave ends an engine call: the marks that came in meanwhile are
 * signalled, unless the thread holds a lock of the shim's (urg_unhold
 * does it then). */
static inline void urg_leave(void)
{
	atomic_fetch_sub(&urg_inside, 1);
	if (!urg_hold)
		urg_deliver();
}

/* urg_unhold ends a stretch in which the thread held a lock of the shim's
 * (an epoll set's): a handler, which may call the shim or leave by
 * siglongjmp, runs only once it is released. */
static void urg_unhold(void)
{
	if (--urg_hold == 0)
		urg_deliver();
}

/* The engine's entry points as loaded; eng holds the counting wrappers. */
static __typeof__(eng) eng_real;

#define URG_WRAP(ret, name, params, args)       \
	static ret urg_##name params            \
	{                                       \
		urg_enter();                    \
		ret r_ = eng_real.name args;    \
		urg_leave();                    \
		return r_;                      \
	}
/* attach runs under attach_mu: a handler calling the engine would find it
 * taken, so marks seen while attaching are signalled by the next call. */
static int urg_attach(int fd, int role, const uint8_t *req, int len)
{
	urg_enter();
	int r = eng_real.attach(fd, role, req, len);
	atomic_fetch_sub(&urg_inside, 1);
	return r;
}
URG_WRAP(int64_t, sendv, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
URG_WRAP(int64_t, sendv_flags, (int fd, const struct iovec *iov, int cnt, int flags), (fd, iov, cnt, flags))
URG_WRAP(int64_t, recvv, (int fd, const struct iovec *iov, int cnt, int flags), (fd, iov, cnt, flags))
URG_WRAP(int, poll, (int fd, int want, int *wait, int *tmo, int *efd, uint32_t *edges), (fd, want, wait, tmo, efd, edges))
URG_WRAP(int, shutdown, (int fd, int how), (fd, how))
URG_WRAP(int, close, (int fd), (fd))
URG_WRAP(int, stats, (char *buf, int len), (buf, len))
URG_WRAP(int, dup, (int oldfd, int newfd), (oldfd, newfd))
URG_WRAP(int64_t, query, (int fd, int what), (fd, what))
URG_WRAP(int64_t, take_early, (int fd, char *buf, int len), (fd, buf, len))
URG_WRAP(int, exit, (void), ())
URG_WRAP(int64_t, recv_cancel, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
URG_WRAP(int64_t, send_cancel, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
URG_WRAP(int, set_buffers, (int fd, int snd, int rcv), (fd, snd, rcv))

/* urg_wrap routes the application's engine calls through the wrappers. */
static void urg_wrap(void)
{
	eng_real = eng;
	eng.attach = urg_attach;
	eng.sendv = urg_sendv;
	if (eng.sendv_flags)
		eng.sendv_flags = urg_sendv_flags;
	eng.recvv = urg_recvv;
	eng.poll = urg_poll;
	eng.shutdown = urg_shutdown;
	eng.close = urg_close;
	eng.stats = urg_stats;
	eng.dup = urg_dup;
	eng.query = urg_query;
	eng.take_early = urg_take_early;
	if (eng.exit)
		eng.exit = urg_exit;
	if (eng.recv_cancel)
		eng.recv_cancel = urg_recv_cancel;
	if (eng.send_cancel)
		eng.send_cancel = urg_send_cancel;
	if (eng.set_buffers)
		eng.set_buffers = urg_set_buffers;
}

static void shim_settling(int delta);

static int load_engine(void)
{
	pid_t me = getpid(); /* not my_pid(): a child forked around libc must not use its parent's engine */
	if (engine_pid == me)
		return 0;
	if (!engine_usable_by(me))
		return -1;
	pthread_mutex_lock(&engine_mu);
	int rc = 0;
	if (engine_pid != getpid()) {
		char path[PATH_MAX] = "";
		void *h = NULL;
		uint64_t before[FD_MAX / 64];
		open_fds(before);
		/* SIGURG stays the application's: the Go runtime installs its own
		 * handler (its preemption signal, unused with asyncpreemptoff=1),
		 * which would swallow it, so the disposition is put back after
		 * the runtime has started; and its threads inherit SIGURG blocked
		 * from this one, so that a SIGURG for the process never runs the
		 * application's handler on a Go thread. */
		struct sigaction urg_act;
		sigset_t urg_set, urg_mask;
		sigemptyset(&urg_set);
		sigaddset(&urg_set, SIGURG);
		sigaction(SIGURG, NULL, &urg_act);
		pthread_sigmask(SIG_BLOCK, &urg_set, &urg_mask);
		if (engine_fd >= 0) {
			char held[64];
			snprintf(held, sizeof held, "/proc/self/fd/%d", engine_fd);
			h = dlopen(held, RTLD_NOW | RTLD_LOCAL);
			if (!h)
				logmsg(1, "cannot load the SDP engine through fd %d (%s); trying its path", engine_fd, dlerror());
		}
		if (!h && engine_path(path, sizeof path) == 0)
			h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

		if (h) {
			eng.init = (sdp_engine_init_fn)dlsym(h, "sdp_engine_init");
			eng.attach = (sdp_attach_fn)dlsym(h, "sdp_attach");
			eng.sendv = (sdp_sendv_fn)dlsym(h, "sdp_sendv");
			eng.sendv_flags = (sdp_sendv_flags_fn)dlsym(h, "sdp_sendv_flags");
			eng.recvv = (sdp_recvv_fn)dlsym(h, "sdp_recvv");
			eng.poll = (sdp_poll_fn)dlsym(h, "sdp_poll");
			eng.shutdown = (sdp_shutdown_fn)dlsym(h, "sdp_shutdown");
			eng.close = (sdp_close_fn)dlsym(h, "sdp_close");
			eng.stats = (sdp_stats_fn)dlsym(h, "sdp_stats");
			eng.dup = (sdp_dup_fn)dlsym(h, "sdp_dup");
			eng.query = (sdp_query_fn)dlsym(h, "sdp_query");
			eng.take_early = (sdp_take_early_fn)dlsym(h, "sdp_take_early");
			eng.exit = (sdp_engine_exit_fn)dlsym(h, "sdp_engine_exit");
			eng.recv_cancel = (sdp_recv_cancel_fn)dlsym(h, "sdp_recv_cancel");
			eng.send_cancel = (sdp_send_cancel_fn)dlsym(h, "sdp_send_cancel");
			eng.set_buffers = (sdp_set_buffers_fn)dlsym(h, "sdp_set_buffers");
		}
		struct sdp_engine_config ec = {
			.abi_version = SDP_ABI_VERSION,
			.log_fd = cfg.log_fd,
			.log_level = cfg.log_level,
			.markers = cfg.markers,
			.crc = cfg.crc,
			.marker_spacing = cfg.marker_spacing,
			.buf_size = cfg.buf_size,
			.recv_bufs = cfg.recv_bufs,
			.connect_timeout_ms = cfg.connect_timeout_ms,
			.snapshot = shim_snapshot,
			.fpdu_align = cfg.fpdu_align,
			.own_fd = shim_own_fd,
			.urgent = shim_urgent,
			.settling = shim_settling,
		};
		snprintf(ec.prog, sizeof ec.prog, "%s", program_invocation_short_name);
		if (!h || !eng.init || !eng.attach || !eng.sendv || !eng.recvv || !eng.poll ||
		    !eng.shutdown || !eng.close || !eng.stats || !eng.dup || !eng.query || !eng.take_early || eng.init(&ec) != 0) {
			logmsg(0, "cannot load the SDP engine %s: %s; using TCP", path, h ? "bad engine" : dlerror());
			engine_failed = 1;
			rc = -1;
		} else {
			urg_wrap();
			engine_pid = getpid();
		}
		sigaction(SIGURG, &urg_act, NULL);
		pthread_sigmask(SIG_SETMASK, &urg_mask, NULL);
		if (h)
			protect_new_fds(before);
	}
	pthread_mutex_unlock(&engine_mu);
	return rc;
}

/* ---- addresses and ports ------------------------------------------------ */

static int sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return -1;
}

static void sa_set_port(struct sockaddr *sa, int port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

/* sdp_port maps an application port to its SDP port, wrapped into
 * 1024..65535 so that ephemeral listeners have one too. */
static int sdp_port(int port)
{
	int span = 65536 - 1024;
	return ((port - 1024 + cfg.port_offset) % span + span) % span + 1024;
}

static void ip16(const struct sockaddr *sa, uint8_t out[16])
{
	memset(out, 0, 16);
	if (sa->sa_family == AF_INET)
		memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa->sa_family == AF_INET6)
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }
static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

/* hello_flow_control is the flow-control byte of the Hello (HH byte 14):
 * 0x80 | mode asked for (0 credit, 1 rdma, 2 nic, 3 transport: SDP_FLOW_CONTROL's
 * codes). The engine reads the same setting and logs a bad value. */
static uint8_t hello_flow_control(void)
{
	return 0x80 | cfg.flow_control;
}

/* build_request writes the MPA Request carrying the SDP Hello (RFC 5044
 * §7.1.1; layout in docs/PROTOCOL.md §2). sdpcore.AppendRequest is the reference
 * encoder and the engine parses these exact bytes back. */
static size_t zcopy_min(void);

static int build_request(uint8_t *b, int fd, uint16_t app_port)
{
	struct sockaddr_storage l, p;
	socklen_t ll = sizeof l, pl = sizeof p;
	memset(&l, 0, sizeof l);
	memset(&p, 0, sizeof p);
	real.getsockname(fd, (struct sockaddr *)&l, &ll);
	real.getpeername(fd, (struct sockaddr *)&p, &pl);
	const int pdlen = 16 + 48;
	memset(b, 0, 20 + pdlen);
	memcpy(b, "MPA ID Req Frame", 16);
	b[16] = (cfg.markers ? 0x80 : 0) | (cfg.crc ? 0x40 : 0);
	b[17] = 1;
	put16(b + 18, pdlen);
	uint8_t *bsdh = b + 20, *hh = b + 36;
	bsdh[0] = 0x00; /* Hello */
	put16(bsdh + 2, cfg.recv_bufs);
	put32(bsdh + 4, pdlen);
	int v6 = l.ss_family == AF_INET6 &&
		 !IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&l)->sin6_addr);
	hh[0] = 0x11;
	hh[1] = (v6 ? 6 : 4) << 4;
	if (zcopy_min() > 0) /* as the engine's Hello: no zero copy, no Write ZCopy */
		hh[1] |= SDP_CAP_WRITE_ZCOPY; /* sdp_recvv ends a Write ZCopy wait by sdp_recv_cancel */
	hh[3] = 1;
	hh[14] = hello_flow_control();
	put32(hh + 4, cfg.buf_size);
	put32(hh + 8, cfg.buf_size);
	put16(hh + 12, app_port);
	ip16((struct sockaddr *)&l, hh + 16);
	ip16((struct sockaddr *)&p, hh + 32);
	return 20 + pdlen;
}

/* ---- rules: OFED libsdp.conf ----------------------------------------------
 *
 *   log [destination stderr | syslog | file <path>] [min-level <1-9>]
 *   use sdp|tcp|both server|listen|connect|client <program> <address>[/<bits>]:<port>[-<port>]
 *
 * <program> is a shell pattern matched against the program's name, <address>
 * an IPv4 address, a bracketed IPv6 address or '*', <port> a number or '*'.
 * The first matching rule wins; no match means both. A file that has no use
 * rule means sdp, as in OFED libsdp. A syntax error is reported once, with
 * file and line, and then no rule of the file applies.
 */

enum { ROLE_SERVER, ROLE_CLIENT };

struct rule {
	int mode, role;
	char prog[64];
	int any_addr, family, bits;
	uint8_t addr[16];
	int port_lo, port_hi;
};

static struct rule *rules;
static int n_rules, rules_loaded;

static int parse_addr_port(char *s, struct rule *r)
{
	char *colon = strrchr(s, ':');
	if (!colon)
		return -1;
	*colon = 0;
	char *port = colon + 1;
	if (!strcmp(port, "*")) {
		r->port_lo = 0;
		r->port_hi = 65535;
	} else {
		char *end;
		long lo = strtol(port, &end, 10), hi = lo;
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (*end || lo < 0 || hi > 65535 || lo > hi || port == end)
			return -1;
		r->port_lo = (int)lo;
		r->port_hi = (int)hi;
	}
	if (!strcmp(s, "*")) {
		r->any_addr = 1;
		return 0;
	}
	char *slash = strchr(s, '/');
	int bits = -1;
	if (slash) {
		*slash = 0;
		char *end;
		bits = (int)strtol(slash + 1, &end, 10);
		if (*end || slash[1] == 0)
			return -1;
	}
	if (s[0] == '[') {
		size_t n = strlen(s);
		if (n < 3 || s[n - 1] != ']')
			return -1;
		s[n - 1] = 0;
		if (inet_pton(AF_INET6, s + 1, r->addr) != 1)
			return -1;
		r->family = AF_INET6;
		r->bits = bits < 0 ? 128 : bits;
		return r->bits <= 128 ? 0 : -1;
	}
	if (inet_pton(AF_INET, s, r->addr + 12) != 1)
		return -1;
	r->family = AF_INET;
	r->bits = bits < 0 ? 32 : bits;
	return r->bits <= 32 ? 0 : -1;
}

static int parse_log(char **tok, int n, const char *file, int line)
{
	for (int i = 1; i < n; i++) {
		if (!strcmp(tok[i], "destination") && i + 1 < n) {
			i++;
			if (!strcmp(tok[i], "stderr")) {
				cfg.log_fd = 2;
			} else if (!strcmp(tok[i], "syslog")) {
				cfg.log_syslog = 1;
			} else if (!strcmp(tok[i], "file") && i + 1 < n) {
				open_log_path(tok[++i]);
			} else {
				logmsg(0, "%s:%d: log destination must be stderr, syslog or file <path>", file, line);
				return -1;
			}
		} else if (!strcmp(tok[i], "min-level") && i + 1 < n) {
			char *end;
			long v = strtol(tok[++i], &end, 10);
			if (*end || v < 1 || v > 9) {
				logmsg(0, "%s:%d: min-level must be 1 to 9", file, line);
				return -1;
			}
			/* 1 is the most verbose, 9 errors only */
			cfg.log_level = v >= 9 ? 0 : v >= 6 ? 1 : v >= 3 ? 2 : 3;
		} else {
			logmsg(0, "%s:%d: unknown log option '%s'", file, line, tok[i]);
			return -1;
		}
	}
	return 0;
}

static int parse_use(char **tok, int n, struct rule *r, const char *file, int line)
{
	if (n != 5) {
		logmsg(0, "%s:%d: use needs: sdp|tcp|both server|connect <program> <address>:<port>", file, line);
		return -1;
	}
	memset(r, 0, sizeof *r);
	if (!strcmp(tok[1], "sdp"))
		r->mode = MODE_SDP;
	else if (!strcmp(tok[1], "tcp"))
		r->mode = MODE_TCP;
	else if (!strcmp(tok[1], "both"))
		r->mode = MODE_BOTH;
	else {
		logmsg(0, "%s:%d: '%s' is not sdp, tcp or both", file, line, tok[1]);
		return -1;
	}
	if (!strcmp(tok[2], "server") || !strcmp(tok[2], "listen"))
		r->role = ROLE_SERVER;
	else if (!strcmp(tok[2], "connect") || !strcmp(tok[2], "client"))
		r->role = ROLE_CLIENT;
	else {
		logmsg(0, "%s:%d: '%s' is not server, listen, connect or client", file, line, tok[2]);
		return -1;
	}
	snprintf(r->prog, sizeof r->prog, "%s", tok[3]);
	if (parse_addr_port(tok[4], r) < 0) {
		logmsg(0, "%s:%d: bad address:port '%s'", file, line, tok[4]);
		return -1;
	}
	return 0;
}

static void load_rules(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno != ENOENT || setting_text(SET_CONFIG_FILE) || setting_text(SET_LIBSDP_CONFIG_FILE))
			logmsg(0, "cannot read %s: %s; no rules apply", path, strerror(errno));
		return;
	}
	char line[1024];
	int lineno = 0, cap = 0, bad = 0;
	struct rule *list = NULL;
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *tok[16];
		int nt = 0;
		for (char *save, *t = strtok_r(line, " \t\r\n", &save); t && nt < 16; t = strtok_r(NULL, " \t\r\n", &save))
			tok[nt++] = t;
		if (!nt)
			continue;
		if (!strcmp(tok[0], "log")) {
			if (parse_log(tok, nt, path, lineno) < 0) {
				bad = 1;
				break;
			}
			continue;
		}
		if (strcmp(tok[0], "use")) {
			logmsg(0, "%s:%d: unknown statement '%s'", path, lineno, tok[0]);
			bad = 1;
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			struct rule *nl = realloc(list, sizeof *nl * cap);
			if (!nl) {
				bad = 1;
				break;
			}
			list = nl;
		}
		if (parse_use(tok, nt, &list[n], path, lineno) < 0) {
			bad = 1;
			break;
		}
		n++;
	}
	fclose(f);
	if (bad) {
		logmsg(0, "%s: ignoring its rules; the defaults apply", path);
		free(list);
		return;
	}
	rules = list;
	n_rules = n;
	rules_loaded = 1;
}

static int addr_match(const struct rule *r, const struct sockaddr *sa)
{
	if (r->any_addr)
		return 1;
	uint8_t ip[16];
	ip16(sa, ip);
	int v4 = sa->sa_family == AF_INET ||
		 (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)sa)->sin6_addr));
	if ((r->family == AF_INET) != v4)
		return 0;
	int off = v4 ? 12 : 0, bits = r->bits;
	for (int i = 0; bits > 0; i++, bits -= 8) {
		uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
		if ((ip[off + i] & mask) != (r->addr[off + i] & mask))
			return 0;
	}
	return 1;
}

/* rule_mode says how a listener (ROLE_SERVER, its local address) or a
 * connection (ROLE_CLIENT, its destination) of this program is carried. */
static int rule_mode(int role, const struct sockaddr *sa)
{
	if (!rules_loaded)
		return cfg.mode;
	if (!n_rules)
		return MODE_SDP;
	int port = sa_port(sa);
	for (int i = 0; i < n_rules; i++) {
		const struct rule *r = &rules[i];
		if (r->role == role && port >= r->port_lo && port <= r->port_hi && addr_match(r, sa) &&
		    fnmatch(r->prog, program_invocation_short_name, 0) == 0)
			return r->mode;
	}
	return MODE_BOTH;
}

/* ---- negative cache: destinations without an SDP listener --------------- */

#define NEG_SLOTS 256
static struct neg { uint8_t ip[16]; uint16_t port; time_t until; } negcache[NEG_SLOTS];
static pthread_mutex_t neg_mu = PTHREAD_MUTEX_INITIALIZER;
#define NEG_SECONDS 30

static unsigned neg_hash(const uint8_t ip[16], uint16_t port)
{
	unsigned h = port * 2654435761u;
	for (int i = 0; i < 16; i++)
		h = h * 31 + ip[i];
	return h % NEG_SLOTS;
}

static int neg_lookup(const struct sockaddr *sa)
{
	uint8_t ip[16];
	ip16(sa, ip);
	uint16_t port = sa_port(sa);
	struct neg *n = &negcache[neg_hash(ip, port)];
	pthread_mutex_lock(&neg_mu);
	int hit = n->port == port && !memcmp(n->ip, ip, 16) && n->until > time(NULL);
	pthread_mutex_unlock(&neg_mu);
	return hit;
}

static void neg_add(const struct sockaddr *sa)
{
	uint8_t ip[16];
	ip16(sa, ip);
	uint16_t port = sa_port(sa);
	struct neg *n = &negcache[neg_hash(ip, port)];
	pthread_mutex_lock(&neg_mu);
	memcpy(n->ip, ip, 16);
	n->port = port;
	n->until = time(NULL) + NEG_SECONDS;
	pthread_mutex_unlock(&neg_mu);
}

/* ---- falling back to TCP ------------------------------------------------ */

/* carried_opts are the options a socket hands on to the sockets made in
 * its place: the fresh socket of a fallback, and a listener's SDP twin,
 * whose accepted sockets inherit them as TCP's inherit their listener's.
 * Not SO_SNDBUF/SO_RCVBUF: setting them would stop the kernel's
 * autotuning, whose values are all a read gives back (the application's
 * are in e). Not TCP_NODELAY and TCP_CORK: the engine sets them on the
 * transport; the application's own values are in e. */
static const int carried_opts[][2] = {
	{ SOL_SOCKET, SO_KEEPALIVE },    { SOL_SOCKET, SO_OOBINLINE },      { SOL_SOCKET, SO_LINGER },
	{ SOL_SOCKET, SO_PRIORITY },     { SOL_SOCKET, SO_RCVTIMEO },       { SOL_SOCKET, SO_SNDTIMEO },
	{ IPPROTO_TCP, TCP_KEEPIDLE },   { IPPROTO_TCP, TCP_KEEPINTVL },    { IPPROTO_TCP, TCP_KEEPCNT },
	{ IPPROTO_TCP, TCP_USER_TIMEOUT }, { IPPROTO_IP, IP_TOS },          { IPPROTO_IPV6, IPV6_TCLASS },
};

static int is_carried(int level, int name)
{
	for (size_t i = 0; i < sizeof carried_opts / sizeof carried_opts[0]; i++)
		if (carried_opts[i][0] == level && carried_opts[i][1] == name)
			return 1;
	return 0;
}

/* carry_opts gives socket to the carried options of socket from, where
 * they differ (a listen() or a fallback: rare enough for 24 calls). */
static void carry_opts(int from, int to)
{
	for (size_t i = 0; i < sizeof carried_opts / sizeof carried_opts[0]; i++) {
		int lv = carried_opts[i][0], nm = carried_opts[i][1];
		unsigned char a[32], b[32];
		socklen_t al = sizeof a, bl = sizeof b;
		if (real.getsockopt(from, lv, nm, a, &al) < 0)
			continue;
		if (real.getsockopt(to, lv, nm, b, &bl) == 0 && al == bl && !memcmp(a, b, al))
			continue;
		real.setsockopt(to, lv, nm, a, al);
	}
}

/* lowat_to_kernel gives the kernel socket of a connection that now runs
 * over plain TCP the SO_RCVLOWAT the shim kept for it (set_rcvlowat). */
static void lowat_to_kernel(int fd, struct fdent *e)
{
	if (e->lowat > 1)
		real.setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &e->lowat, sizeof e->lowat);
}

/* replace_socket puts a fresh socket of the same kind in place of fd,
 * keeping the descriptor number, its flags and the options that matter. */
static int replace_socket(int fd, struct fdent *e)
{
	int fl = fcntl(fd, F_GETFL);
	int fdfl = fcntl(fd, F_GETFD);
	int ns = real.socket(e->family, SOCK_STREAM, 0);
	if (ns < 0)
		return -1;
	carry_opts(fd, ns);
	int v;
	socklen_t vl = sizeof v;
	if (real.getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v, &vl) == 0 && v != 0)
		real.setsockopt(ns, SOL_SOCKET, SO_REUSEADDR, &v, vl);
	if (e->nodelay > 0)
		real.setsockopt(ns, IPPROTO_TCP, TCP_NODELAY, &e->nodelay, sizeof e->nodelay);
	if (e->cork > 0)
		real.setsockopt(ns, IPPROTO_TCP, TCP_CORK, &e->cork, sizeof e->cork);
	lowat_to_kernel(ns, e);
	if (e->family == AF_INET6) {
		int v;
		socklen_t l = sizeof v;
		if (real.getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, &l) == 0)
			setsockopt(ns, IPPROTO_IPV6, IPV6_V6ONLY, &v, l);
	}
	if (fl >= 0)
		fcntl(ns, F_SETFL, fl);
	int r = real.dup3(ns, fd, (fdfl >= 0 && (fdfl & FD_CLOEXEC)) ? O_CLOEXEC : 0);
	int saved = errno;
	real.close(ns);
	if (r < 0) {
		errno = saved;
		return -1;
	}
	if (e->boundlen)
		real.bind(fd, (struct sockaddr *)&e->bound, e->boundlen);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* send_early sends over the fresh TCP connection the bytes the application
 * wrote while the SDP attempt was in progress, before anything else can be
 * written. It waits for the connection (bounded) when there are any. */
static int send_early(int fd, int connect_rc)
{
	char buf[16384];
	int64_t n = eng.take_early(fd, buf, sizeof buf);
	if (n <= 0) {
		if (connect_rc < 0)
			errno = EINPROGRESS;
		return connect_rc;
	}
	int64_t deadline = now_ms() + cfg.connect_timeout_ms + 10000;
	if (connect_rc < 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int err = 0;
		socklen_t l = sizeof err;
		if (real.poll(&p, 1, cfg.connect_timeout_ms + 10000) <= 0 ||
		    real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err) {
			logmsg(1, "fd %d: TCP connection for the fallback failed; %lld early bytes lost",
			       fd, (long long)n);
			errno = err ? err : ETIMEDOUT;
			return -1;
		}
	}
	while (n > 0) {
		for (int64_t off = 0; off < n;) {
			ssize_t w = real.send(fd, buf + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w > 0) {
				off += w;
				continue;
			}
			if (w < 0 && (errno == EAGAIN || errno == EINTR) && now_ms() < deadline) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };
				real.poll(&p, 1, 100);
				continue;
			}
			return -1;
		}
		n = eng.take_early(fd, buf, sizeof buf);
	}
	return 0;
}

/* send_reject tells an SDP listener that this connection is given up, by an
 * MPA Reply with the Reject flag (RFC 5044 §7.1), before the socket is
 * replaced: its accept() then drops it instead of handing the application
 * a connection that ends at once. Only for a peer known to be an SDP
 * listener (it passed trust_check; a foreign one never gets a byte). */
static void send_reject(int fd)
{
	uint8_t b[20] = "MPA ID Rep Frame";
	b[16] = 0x20; /* R */
	b[17] = 1;
	real.send(fd, b, sizeof b, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* reconnected notes, for a connection the application saw established,
 * how the fallback's connect to P went (r, errno): its failure is what TCP
 * shows of that connection, a reset (ECONNRESET for a refusal, never a
 * connect's ECONNREFUSED), reported once by the next call (sk_err); one
 * still in progress is settled by that call (settle_reconnect). */
static void reconnected(struct fdent *e, int r)
{
	int err = errno;
	if (r == 0)
		return;
	if (err == EINPROGRESS || err == EINTR)
		atomic_store(&e->reconnecting, 1);
	else
		atomic_store(&e->sk_err, err == ECONNREFUSED ? ECONNRESET : err);
	errno = err;
}

/* reconnect connects fd to P without blocking, whatever its mode: refused,
 * the socket is then left as a reset leaves one (end of stream, EPIPE), where
 * a blocking connect's failure disconnects it (ENOTCONN). */
static int reconnect(int fd, struct fdent *e)
{
	int fl = real.fcntl(fd, F_GETFL);
	int toggle = fl >= 0 && !(fl & O_NONBLOCK);
	if (toggle)
		real.fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	int r = real.connect(fd, (struct sockaddr *)&e->dst, e->dstlen);
	int err = errno;
	if (toggle)
		real.fcntl(fd, F_SETFL, fl);
	errno = err;
	return r;
}

/* fallback reconnects fd over plain TCP to the application's address. It
 * returns connect()'s result (-1 with EINPROGRESS for a non-blocking one,
 * and for any reconnection of a connection the application saw established,
 * which the next call settles). */
static int fallback(int fd, struct fdent *e, int reason)
{
	if (reason & SDP_FALLBACK_RESET) {
		reason &= ~SDP_FALLBACK_RESET;
		atomic_store(&e->sk_err, ECONNRESET);
	}
	if (e->passive || reason == SDP_REASON_PEER_CLOSED) {
		/* The socket stays: the engine let go of a connection whose
		 * peer left before the handshake (either side) or before its
		 * first FPDU (the accepting side). */
		e->at_eof = 1;
		mark_tcp(fd, e, reason);
		lowat_to_kernel(fd, e);
		if (engine_pid == getpid())
			send_early(fd, 0); /* what it wrote first: the kernel answers as TCP does */
		return 0;
	}
	if (e->sdp_only) {
		logmsg(1, "fd %d: no SDP peer (%s) and the configuration says sdp only", fd, reason_name(reason));
		atomic_store(&e->kind, K_TCP);
		e->reason = reason;
		lowat_to_kernel(fd, e);
		e->so_error = ECONNREFUSED;
		errno = ECONNREFUSED;
		return -1;
	}
	int k = atomic_load(&e->kind), up = k == K_ACTIVE || k == K_SDP;
	if (reason != SDP_REASON_RULE && reason != SDP_REASON_CACHED)
		neg_add((struct sockaddr *)&e->dst);
	if (reason == SDP_REASON_TIMEOUT || reason == SDP_REASON_VERSION || reason == SDP_REASON_ENGINE ||
	    reason == SDP_REASON_AFTER_FORK)
		send_reject(fd);
	mark_tcp(fd, e, reason);
	if (replace_socket(fd, e) < 0)
		return -1;
	int r = up ? reconnect(fd, e) : real.connect(fd, (struct sockaddr *)&e->dst, e->dstlen);
	if (engine_pid == getpid() && (r == 0 || errno == EINPROGRESS))
		r = send_early(fd, r);
	if (up)
		reconnected(e, r);
	return r;
}

/* reason_of is the reason of an engine's fallback result, with
 * SDP_FALLBACK_RESET kept for fallback(). */
static int reason_of(int rc)
{
	int r = -rc - SDP_FALLBACK;
	int base = r == (SDP_REASON_PEER_CLOSED | SDP_FALLBACK_RESET) ? SDP_REASON_PEER_CLOSED : r;
	return (base > 0 && base < SDP_REASON_MAX) ? r : SDP_REASON_FOREIGN;
}

/* ---- attaching connections to the engine -------------------------------- */

/* is_nonblocking asks the kernel once per descriptor: O_NONBLOCK changes
 * through fcntl(F_SETFL) and ioctl(FIONBIO), which keep the answer up to
 * date, except on a socket that another descriptor may share (dup, or
 * inherited), which is asked every time. */
static int nonblock_cached(struct fdent *e)
{
	if (e->dupped || e->shared || atomic_load(&e->nb_forks) != atomic_load(&n_forks))
		return -1;
	return atomic_load(&e->nb);
}

static void nonblock_learnt(struct fdent *e, int v)
{
	atomic_store(&e->nb_forks, atomic_load(&n_forks));
	atomic_store(&e->nb, v);
}

static int is_nonblocking(int fd)
{
	struct fdent *e = ours(fd);
	int v = e ? nonblock_cached(e) : -1;
	if (v >= 0)
		return v;
	int fl = real.fcntl(fd, F_GETFL);
	v = fl >= 0 && (fl & O_NONBLOCK);
	if (e && fl >= 0)
		nonblock_learnt(e, v);
	return v;
}

/* attach_siblings makes the other pending descriptors of fd's socket
 * (sshd's 0 and 1 after dup2 and exec) descriptors of the same engine
 * connection. They are found by the socket's inode. */
static void attach_siblings(int fd)
{
	struct stat a, b;
	if (fstat(fd, &a) < 0)
		return;
	for (int i = 0; i < FD_MAX; i++) {
		struct fdent *o = i == fd ? NULL : atomic_load_explicit(&fdtab[i], memory_order_acquire);
		if (!o || !o->shared)
			continue;
		int k = atomic_load(&o->kind);
		if ((k != K_PASSIVE && k != K_ACTIVE) || fstat(i, &b) < 0 || b.st_ino != a.st_ino || b.st_dev != a.st_dev)
			continue;
		logmsg(3, "fd %d: also fd %d (same socket)", fd, i);
		if (eng.dup(fd, i) == 0) {
			o->engine_pid = getpid();
			atomic_store(&o->kind, K_SDP);
		}
	}
}

/* attach hands a connected SDP socket to this process's engine. It returns
 * 0, or -1 with errno. A connecting-side socket whose engine cannot be had
 * falls back to TCP. */
static pthread_mutex_t attach_mu = PTHREAD_MUTEX_INITIALIZER;

static int attach_locked(int fd, struct fdent *e);
static int resolve_connecting(int fd, struct fdent *e, short revents);
static int restartable(void);

/* settle_connecting finishes, for a data call, a non-blocking connect to an
 * SDP port that the application did not wait for: bytes written before the
 * kernel's handshake completes go to the engine (which holds them until the
 * MPA exchange is done), never raw onto the SDP port. A call that may block
 * waits for the connect; one that may not gets EAGAIN while it is in
 * progress, as on a TCP socket that is still connecting. Returns 0 (the
 * connection is K_ACTIVE now, or TCP after a refusal) or -1 with errno. */
static int settle_connecting(int fd, struct fdent *e, int may_block)
{
	while (atomic_load(&e->kind) == K_CONNECTING) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int r = real.poll(&p, 1, may_block ? -1 : 0);
		if (r < 0 && errno == EINTR && restartable())
			continue;
		if (r < 0)
			return -1;
		if (r == 0) {
			errno = EAGAIN;
			return -1;
		}
		pthread_mutex_lock(&attach_mu);
		if (atomic_load(&e->kind) == K_CONNECTING)
			resolve_connecting(fd, e, p.revents);
		pthread_mutex_unlock(&attach_mu);
	}
	return 0;
}

/* ---- connections pending across fork: one process takes each ----------
 *
 * A connection not yet handed to an engine when the process forks is open in
 * both processes, and either may use it first; an SDP connection's state can
 * live in one engine only. The first process to use it claims it in a table
 * shared by the processes of the fork (mapped before the first fork); any
 * other then fails at once with EIO and a log line, instead of waiting for a
 * handshake the first one consumed. Keyed by the socket's inode, which every
 * descriptor of the socket shares. */

#define CLAIMS 1024
static struct claim {
	_Atomic uint64_t ino;
	_Atomic int32_t pid;
} *claims;

static void claims_map(void)
{
	if (claims)
		return;
	void *m = mmap(NULL, CLAIMS * sizeof *claims, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m != MAP_FAILED)
		claims = m;
}

/* claim_take claims fd's socket for this process: 0, or the pid of the
 * process that claimed it first. A full table claims nothing (0). */
static pid_t claim_take(int fd)
{
	struct stat st;
	if (!claims || fstat(fd, &st) < 0 || !st.st_ino)
		return 0;
	uint64_t ino = st.st_ino;
	pid_t me = getpid();
	for (unsigned i = 0, h = (unsigned)(ino * 2654435761u) % CLAIMS; i < CLAIMS; i++, h = (h + 1) % CLAIMS) {
		uint64_t cur = atomic_load(&claims[h].ino);
		if (cur == 0) {
			uint64_t zero = 0;
			if (!atomic_compare_exchange_strong(&claims[h].ino, &zero, ino) && zero != ino)
				continue; /* another socket took the slot */
			int32_t none = 0;
			atomic_compare_exchange_strong(&claims[h].pid, &none, me);
			cur = ino;
		}
		if (cur != ino)
			continue;
		pid_t owner;
		while ((owner = atomic_load(&claims[h].pid)) == 0) /* the slot's taker is writing its pid */
			sched_yield();
		return owner == me ? 0 : owner;
	}
	return 0;
}

/* Two threads may make the first call on a connection at once; one hands
 * it to the engine, the other finds it handed. */
static int attach(int fd, struct fdent *e)
{
	int k = atomic_load(&e->kind);
	if (k == K_SDP && e->engine_pid == my_pid())
		return 0;
	if (k == K_CONNECTING && settle_connecting(fd, e, !is_nonblocking(fd)) < 0)
		return -1;
	pthread_mutex_lock(&attach_mu);
	int r = attach_locked(fd, e);
	int saved = errno;
	pthread_mutex_unlock(&attach_mu);
	errno = saved;
	return r;
}

static int attach_locked(int fd, struct fdent *e)
{
	int k = atomic_load(&e->kind);
	if (k == K_SDP) {
		if (e->engine_pid == getpid())
			return 0;
		logmsg(0, "fd %d: SDP connection of another process (used after fork); "
			  "only the process that started it can use it", fd);
		errno = EIO;
		return -1;
	}
	if (load_engine() != 0) {
		if (k == K_ACTIVE) {
			int r = fallback(fd, e, engine_failed ? SDP_REASON_ENGINE : SDP_REASON_AFTER_FORK);
			/* Its failure is the connection's, for the call (sk_err). */
			return r < 0 && errno != EINPROGRESS && !atomic_load(&e->sk_err) ? -1 : 0;
		}
		errno = EIO;
		return -1;
	}
	if (e->born_forks != atomic_load(&n_forks)) {
		pid_t owner = claim_take(fd);
		if (owner) {
			logmsg(0, "fd %d: connection already used over SDP by process %d, with which it was shared by "
				  "fork(); an SDP connection belongs to one process: keep this program's connections "
				  "on TCP (rule 'use tcp client|server %s *:*')",
			       fd, (int)owner, program_invocation_short_name);
			errno = EIO;
			return -1;
		}
	}
	logmsg(3, "fd %d: handing the %s connection to the engine", fd, kind_name(k));
	if ((e->sndbuf || e->rcvbuf) && eng.set_buffers)
		eng.set_buffers(fd, e->sndbuf, e->rcvbuf); /* before its first read */
	int rc = eng.attach(fd, k == K_PASSIVE ? SDP_ROLE_PASSIVE : SDP_ROLE_ACTIVE | (e->patient ? SDP_ROLE_PATIENT : 0),
			    k == K_PASSIVE ? e->req : NULL, k == K_PASSIVE ? e->reqlen : 0);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	e->engine_pid = engine_pid; /* this process's: eng.attach needed it loaded */
	if ((e->sndbuf || e->rcvbuf) && eng.set_buffers)
		eng.set_buffers(fd, e->sndbuf, e->rcvbuf);
	atomic_store(&e->kind, K_SDP);
	if (e->shared)
		attach_siblings(fd);
	return 0;
}

/* ---- waiting -------------------------------------------------------------- */

/* drain_wakeups empties a connection's eventfd after it woke this thread. */
static void drain_wakeups(int efd)
{
	uint64_t v;
	ssize_t r = real.read(efd, &v, sizeof v);
	(void)r;
}

/* restartable says whether a blocking call interrupted by a signal should
 * go on, as the kernel restarts it after a handler installed with
 * SA_RESTART. Which signal arrived is not known here, so it goes on only if
 * every installed handler asked for restarting; otherwise the caller sees
 * EINTR, which programs must handle anyway. */
static int restartable(void)
{
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0)
			continue;
		if (!(sa.sa_flags & SA_SIGINFO) && (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return 0;
	}
	return 1;
}

static pid_t my_tid(void)
{
	static __thread pid_t tid;
	if (!tid)
		tid = (pid_t)syscall(SYS_gettid);
	return tid;
}

/* Several threads blocked on one connection share its eventfd; one of them
 * may empty it just after the engine rang it for another, which then sleeps
 * on. Such a connection's waits are bounded, so that wake-up is late by at
 * most this much, never lost. */
#define SHARED_WAIT_MS 10

/* call_deadline is when a blocking call on fd gives up with EAGAIN: now plus
 * the socket's SO_RCVTIMEO (want POLLIN) or SO_SNDTIMEO (POLLOUT), as the
 * kernel times a blocking TCP call; -1 when none is set. Asked once per
 * call, and only when the call has to wait. */
static int64_t call_deadline(int fd, int want)
{
	struct timeval tv = { 0, 0 };
	socklen_t l = sizeof tv;
	if (real.getsockopt(fd, SOL_SOCKET, want == POLLIN ? SO_RCVTIMEO : SO_SNDTIMEO, &tv, &l) < 0 ||
	    (tv.tv_sec == 0 && tv.tv_usec == 0))
		return -1;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec + (int64_t)tv.tv_sec * 1000000000 +
	       (int64_t)tv.tv_usec * 1000;
}

/* ms_left is what remains until deadline (call_deadline), rounded up; 0 once
 * it has passed. */
static int ms_left(int64_t deadline)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t left = deadline - ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
	if (left <= 0)
		return 0;
	return left / 1000000 >= INT_MAX ? INT_MAX : (int)((left + 999999) / 1000000);
}

/* lowat_met says whether need bytes are there to read on fd, or as many as
 * the connection takes before the application reads some (the peer has no
 * room left to send into): TCP's low-water mark gives way too when its
 * receive window is closed. */
static int lowat_met(int fd, int need)
{
	int64_t q = eng.query(fd, SDP_QUERY_INQ);
	return q < 0 || q >= need || eng.query(fd, SDP_QUERY_RXSTALL) > 0;
}

/* lowat_poll is eng.poll for a reader that needs need > 1 bytes
 * (SO_RCVLOWAT). The engine calls one byte readable, so POLLIN is asked as
 * POLLRDHUP (end of stream): then the engine counts a sleeper and names
 * what to wait for while the mark is not met. POLLIN is reported when
 * lowat_met, at end of stream or on an error; until then *kw has POLLIN,
 * so the caller waits for more bytes on the kernel socket too. */
static int lowat_poll(int fd, int need, int want, int *kw, int *tmo, int *efd, uint32_t *edges)
{
	int r = eng.poll(fd, (want & ~POLLIN) | POLLRDHUP, kw, tmo, efd, edges);
	if (r < 0)
		return r;
	if ((r & (POLLRDHUP | POLLERR | POLLHUP)) || lowat_met(fd, need))
		r |= POLLIN;
	else
		*kw |= POLLIN;
	if (!(want & POLLRDHUP))
		r &= ~POLLRDHUP;
	if (*efd >= 0 && (want & SDP_POLL_SLEEP) && (r & want & 0xffff)) {
		/* Ready after all: the caller does not sleep. */
		int k2, t2, f2;
		uint32_t g2;
		eng.poll(fd, SDP_POLL_WOKE, &k2, &t2, &f2, &g2);
		*efd = -1;
	}
	return r;
}

/* wait_ready blocks until the engine says want is ready on fd (or an error
 * or hang-up is); for POLLIN, need bytes (SO_RCVLOWAT; 1 for any). Returns
 * 0, -EINTR, -EAGAIN when the call's SO_RCVTIMEO or SO_SNDTIMEO has passed
 * (*deadline: 0 until the call first waits, then call_deadline's), or the
 * engine's negative result. */
static int wait_ready(int fd, int want, int need, int64_t *deadline)
{
	if (*deadline == 0)
		*deadline = call_deadline(fd, want);
	struct fdent *e = ours(fd);
	if (e) {
		pid_t t = my_tid(), last = atomic_exchange(&e->last_tid, t);
		if (last && last != t)
			atomic_store(&e->threads, 1);
	}
	int woke = 0; /* the last look counted this thread as a sleeper */
	for (;;) {
		int kw = 0, tmo = -1, efd = -1;
		uint32_t edges;
		int f = want | SDP_POLL_SLEEP | SDP_POLL_BLOCK | woke;
		int r = need > 1 ? lowat_poll(fd, need, f, &kw, &tmo, &efd, &edges) : eng.poll(fd, f, &kw, &tmo, &efd, &edges);
		if (r < 0)
			return r;
		if (r & (want | POLLERR | POLLHUP))
			return 0;
		woke = efd >= 0 ? SDP_POLL_WOKE : 0;
		if (kw == 0)
			kw = POLLIN;
		if (e && atomic_load(&e->threads) && (tmo < 0 || tmo > SHARED_WAIT_MS))
			tmo = SHARED_WAIT_MS;
		if (*deadline > 0) {
			int left = ms_left(*deadline);
			if (left == 0) {
				if (woke)
					eng.poll(fd, SDP_POLL_WOKE, &kw, &tmo, &efd, &edges);
				return -EAGAIN;
			}
			if (tmo < 0 || tmo > left)
				tmo = left;
		}
		struct pollfd p[2] = { { .fd = fd, .events = (short)kw }, { .fd = efd, .events = POLLIN } };
		unsigned urg = atomic_load(&urg_sent);
		if (real.poll(p, efd >= 0 ? 2 : 1, tmo) < 0 && errno == EINTR && !restartable() && !urg_restart(urg)) {
			if (woke)
				eng.poll(fd, SDP_POLL_WOKE, &kw, &tmo, &efd, &edges);
			return -EINTR;
		}
		if (woke && (p[1].revents & POLLIN))
			drain_wakeups(efd);
	}
}

/* ---- data transfer on SDP sockets --------------------------------------- */

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t t = 0;
	for (int i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

/* iov_advance returns a copy of iov without its first off bytes. */
static int iov_advance(const struct iovec *iov, int cnt, size_t off, struct iovec *out, int max)
{
	int n = 0;
	for (int i = 0; i < cnt && n < max; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		out[n].iov_base = (char *)iov[i].iov_base + off;
		out[n].iov_len = iov[i].iov_len - off;
		off = 0;
		n++;
	}
	return n;
}

#define IOV_LOCAL 64

/* A connecting-side socket that fell back to TCP while the application was
 * in a data call: the call goes on over the kernel socket. */
static ssize_t sdp_sendv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags);
static ssize_t sdp_recvv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags);

/* take_err takes e's pending error (sk_err): 0, or -1 with errno set to it,
 * as the kernel reports its own to the next call and then forgets it. The
 * connection is over (reset_told): tcp_ready keeps it out of the kernel's
 * epoll sets. */
static int take_err(struct fdent *e)
{
	int err = atomic_exchange(&e->sk_err, 0);
	if (!err)
		return 0;
	atomic_store(&e->reset_told, 1);
	errno = err;
	return -1;
}

/* settle_reconnect finishes, for a call on fd, the fallback's connect to P
 * (reconnected): its failure becomes sk_err, a refusal ECONNRESET. A call
 * that may block waits for it, as settle_connecting does; one that may not
 * finds it in progress and gets the kernel's answer for a socket still
 * connecting (EAGAIN). Returns 0, or -1 with errno (EINTR). */
static int settle_reconnect(int fd, struct fdent *e, int may_block)
{
	while (atomic_load(&e->reconnecting)) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int r = real.poll(&p, 1, may_block ? -1 : 0);
		if (r < 0 && errno == EINTR && restartable())
			continue;
		if (r <= 0)
			return r;
		if (!atomic_exchange(&e->reconnecting, 0))
			break; /* another thread took the outcome */
		int err = 0;
		socklen_t l = sizeof err;
		if (real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err)
			atomic_store(&e->sk_err, err == ECONNREFUSED ? ECONNRESET : err);
	}
	return 0;
}

/* tcp_recvv and tcp_sendv are the calls of a connection that is plain TCP
 * now: its reconnection settled and its pending error first, then the
 * kernel's socket. */
static ssize_t tcp_iov(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags, int send)
{
	if (atomic_load(&e->reconnecting) &&
	    settle_reconnect(fd, e, !(flags & MSG_DONTWAIT) && !is_nonblocking(fd)) < 0)
		return -1;
	if (take_err(e) < 0)
		return -1;
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = cnt };
	ssize_t r = send ? real.sendmsg(fd, &m, flags) : real.recvmsg(fd, &m, flags);
	if (r < 0 && errno == ECONNREFUSED && atomic_exchange(&e->reconnecting, 0))
		errno = ECONNRESET; /* refused since settle_reconnect looked */
	return r;
}

static ssize_t tcp_recvv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags)
{
	return tcp_iov(fd, e, iov, cnt, flags, 0);
}

static ssize_t tcp_sendv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags)
{
	return tcp_iov(fd, e, iov, cnt, flags, 1);
}

/* after_fallback_send finishes a send whose connection the engine let go
 * of (rc is its fallback result) over TCP: a reconnection that failed or is
 * in progress is the connection's (reconnected), for tcp_sendv to report. */
static ssize_t after_fallback_send(int fd, struct fdent *e, int rc, const struct iovec *iov, int cnt, int flags)
{
	int r = fallback(fd, e, reason_of(rc));
	if (r < 0 && errno != EINPROGRESS && !atomic_load(&e->sk_err))
		return -1;
	return tcp_sendv(fd, e, iov, cnt, flags | MSG_NOSIGNAL);
}

/* after_fallback_recv finishes a receive whose connection the engine let go
 * of (rc is its fallback result): the call goes on over TCP. */
static ssize_t after_fallback_recv(int fd, struct fdent *e, int rc, const struct iovec *iov, int cnt, int flags)
{
	int r = fallback(fd, e, reason_of(rc));
	if (r < 0 && errno != EINPROGRESS && !atomic_load(&e->sk_err))
		return -1;
	return tcp_recvv(fd, e, iov, cnt, flags);
}

/* fallback_sent finishes a send that the engine took in part before it fell
 * back: it has let go of the descriptor and holds those bytes as early data,
 * so the connection moves to TCP now (which sends them first) and the send
 * reports them. */
static ssize_t fallback_sent(int fd, struct fdent *e, int rc, size_t done)
{
	fallback(fd, e, reason_of(rc));
	return (ssize_t)done;
}

/* zcopy_min is SDP_ZCOPY_THRESHOLD (0: no zero copy), which the engine
 * reads too. Only calls of at least this many bytes are told that they
 * wait, so that smaller ones cost no fcntl. */
static size_t zcopy_min(void)
{
	return (size_t)cfg.zcopy_threshold;
}

/* call_waits says whether a data call of len bytes may block in the
 * application's view, so its buffers stay valid for the whole call. */
static int call_waits(int fd, size_t len, int flags, int *nonblock)
{
	size_t min = zcopy_min();
	if (min == 0 || len < min || (flags & MSG_DONTWAIT))
		return 0;
	if (*nonblock < 0)
		*nonblock = is_nonblocking(fd);
	return !*nonblock;
}

/* reset_once is the errno a failed data call reports, as Linux TCP reports
 * a reset: ECONNRESET once, then EPIPE for a write and end of stream (0) for
 * a read. The shim is where errors reach the application, so it counts. */
static int reset_once(struct fdent *e, int err, int send)
{
	if (err != ECONNRESET || !atomic_exchange(&e->reset_told, 1))
		return err;
	return send ? EPIPE : 0;
}

static ssize_t sdp_sendv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags)
{
	if (atomic_load(&e->kind) == K_TCP) /* here for via_shim's reasons */
		return tcp_sendv(fd, e, iov, cnt, flags);
	if (atomic_load(&e->kind) == K_CONNECTING &&
	    settle_connecting(fd, e, !(flags & MSG_DONTWAIT) && !is_nonblocking(fd)) < 0)
		return -1;
	if (attach(fd, e) < 0)
		return -1;
	if (atomic_load(&e->kind) == K_TCP)
		return tcp_sendv(fd, e, iov, cnt, flags);
	if ((flags & MSG_OOB) && !eng.sendv_flags) {
		errno = EOPNOTSUPP;
		return -1;
	}
	size_t total = iov_total(iov, cnt), done = 0;
	struct iovec local[IOV_LOCAL];
	int nonblock = -1;
	int64_t deadline = 0; /* SO_SNDTIMEO, once the call waits */
	for (;;) {
		int lc = iov_advance(iov, cnt, done, local, IOV_LOCAL);
		int64_t n;
		int ef = 0;
		if (eng.sendv_flags) {
			ef = (flags & MSG_MORE) || e->cork > 0 ? SDP_SEND_MORE : 0;
			if (flags & MSG_OOB) /* the last byte is urgent; a partial send leaves it for the next call */
				ef = SDP_SEND_OOB;
			else if (call_waits(fd, local[0].iov_len, flags, &nonblock))
				ef |= SDP_SEND_WAIT;
			n = eng.sendv_flags(fd, local, lc, ef);
		} else {
			n = eng.sendv(fd, local, lc);
		}
		if (n >= 0) {
			done += n;
			if (done >= total)
				return done;
			continue;
		}
		if (n <= -SDP_FALLBACK) {
			if (done)
				return fallback_sent(fd, e, (int)n, done);
			return after_fallback_send(fd, e, (int)n, iov, cnt, flags);
		}
		if (n == -EAGAIN) {
			if (nonblock < 0)
				nonblock = (flags & MSG_DONTWAIT) || is_nonblocking(fd);
			if (nonblock) {
				/* The application saw the transport full: the room that
				 * comes back is a new edge for EPOLLET waiters. */
				atomic_fetch_add(&e->wfull, 1);
				if (done)
					return done;
				errno = EAGAIN;
				return -1;
			}
			int w = wait_ready(fd, POLLOUT, 1, &deadline);
			if (w < 0 && w > -SDP_FALLBACK && (ef & SDP_SEND_WAIT) && eng.send_cancel) {
				/* The engine may have offered these bytes to the peer
				 * (Read ZCopy): it keeps its own copy of what the peer
				 * has not read and reports them taken. */
				int64_t k = eng.send_cancel(fd, local, lc);
				if (k > 0)
					return done + (size_t)k;
			}
			if (w == -EINTR || w == -EAGAIN) {
				if (done)
					return done;
				errno = -w;
				return -1;
			}
			if (w <= -SDP_FALLBACK) {
				if (done)
					return fallback_sent(fd, e, w, done);
				return after_fallback_send(fd, e, w, iov, cnt, flags);
			}
			continue;
		}
		if (done)
			return done;
		int err = reset_once(e, (int)-n, 1);
		if (err == EPIPE && !(flags & MSG_NOSIGNAL))
			raise(SIGPIPE);
		errno = err;
		return -1;
	}
}

/* sdp_recv_trunc is a receive with MSG_TRUNC, which on a TCP socket takes
 * the bytes (with MSG_PEEK only counts them) without writing them: the
 * buffer may be NULL. They are read into a scratch buffer, named as many
 * times as a round needs; later rounds take only what is already there,
 * unless MSG_WAITALL or SO_RCVLOWAT asks for more. */
static ssize_t sdp_recv_trunc(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags)
{
	char scratch[4096];
	struct iovec v[IOV_LOCAL];
	size_t len = iov_total(iov, cnt), done = 0;
	size_t need = e->lowat > 1 && (size_t)e->lowat < len ? (size_t)e->lowat : 1;
	int more = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
	flags &= ~MSG_TRUNC;
	if (len == 0)
		return sdp_recvv(fd, e, iov, cnt, flags);
	for (;;) {
		size_t round = 0;
		int n = 0;
		for (; n < IOV_LOCAL && round < len - done; n++) {
			size_t l = len - done - round < sizeof scratch ? len - done - round : sizeof scratch;
			v[n] = (struct iovec){ scratch, l };
			round += l;
		}
		ssize_t r = sdp_recvv(fd, e, v, n, flags | (done && !more && done >= need ? MSG_DONTWAIT : 0));
		if (r < 0)
			return done ? (ssize_t)done : -1;
		if ((flags & MSG_PEEK) && (size_t)r == round && len > round) {
			/* A peek cannot go on from an offset: count the rest. */
			int64_t q = eng.query(fd, SDP_QUERY_INQ);
			return q > r ? (ssize_t)((size_t)q < len ? (size_t)q : len) : r;
		}
		done += (size_t)r;
		if ((size_t)r < round || done >= len || (flags & MSG_PEEK))
			return done;
	}
}

/* peek_lowat: a blocking MSG_PEEK waits, taking nothing, until need bytes
 * (SO_RCVLOWAT) are there, or end of stream, an error, or a receive side
 * that takes no more (lowat_met), as TCP's does. Returns 1 to go on with
 * the peek, 0 when the wait was cut short (a timeout, a signal, the engine
 * letting go): *res is then the call's result. */
static int peek_lowat(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags, int need,
		      int64_t *deadline, ssize_t *res)
{
	if ((flags & MSG_DONTWAIT) || is_nonblocking(fd))
		return 1;
	int w = wait_ready(fd, POLLIN, need, deadline);
	if (w <= -SDP_FALLBACK) {
		*res = after_fallback_recv(fd, e, w, iov, cnt, flags);
		return 0;
	}
	if (w != -EINTR && w != -EAGAIN)
		return 1; /* ready, or an error that the peek reports */
	int64_t n = eng.recvv(fd, iov, cnt, SDP_RECV_PEEK); /* what is there */
	if (n > 0) {
		*res = n;
	} else {
		errno = -w;
		*res = -1;
	}
	return 0;
}

static ssize_t sdp_recvv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags)
{
	if (atomic_load(&e->kind) == K_TCP) /* here for via_shim's reasons */
		return tcp_recvv(fd, e, iov, cnt, flags);
	if (atomic_load(&e->kind) == K_CONNECTING &&
	    settle_connecting(fd, e, !(flags & MSG_DONTWAIT) && !is_nonblocking(fd)) < 0)
		return -1;
	if (attach(fd, e) < 0)
		return -1;
	if (atomic_load(&e->kind) == K_TCP)
		return tcp_recvv(fd, e, iov, cnt, flags);
	if (flags & MSG_TRUNC)
		return sdp_recv_trunc(fd, e, iov, cnt, flags);
	if (flags & MSG_OOB) {
		/* The urgent byte: never waits, as on TCP. */
		int64_t n = eng.recvv(fd, iov, cnt, SDP_RECV_OOB | ((flags & MSG_PEEK) ? SDP_RECV_PEEK : 0));
		if (n >= 0)
			return n;
		if (n <= -SDP_FALLBACK) {
			if (fallback(fd, e, reason_of((int)n)) < 0 && errno != EINPROGRESS && !atomic_load(&e->sk_err))
				return -1;
			return tcp_recvv(fd, e, iov, cnt, flags);
		}
		errno = (int)-n;
		return -1;
	}
	size_t total = iov_total(iov, cnt), done = 0;
	int waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
	int eflags = (flags & MSG_PEEK) ? SDP_RECV_PEEK : 0;
	struct iovec local[IOV_LOCAL];
	int nonblock = -1, fill = 0;
	int64_t deadline = 0; /* SO_RCVTIMEO, once the call waits */
	size_t need = 1; /* SO_RCVLOWAT: a blocking call waits for this much */
	if (e->lowat > 1) {
		need = (size_t)e->lowat < total ? (size_t)e->lowat : total;
		ssize_t res;
		if ((flags & MSG_PEEK) && need > 1 && !peek_lowat(fd, e, iov, cnt, flags, (int)need, &deadline, &res))
			return res;
	}
	for (;;) {
		int lc = iov_advance(iov, cnt, done, local, IOV_LOCAL);
		int ef = eflags;
		if (done)
			ef |= SDP_RECV_FILL; /* 0 at the urgent mark: the call ends there */
		if (!fill && call_waits(fd, local[0].iov_len, flags, &nonblock))
			ef |= SDP_RECV_WAIT;
		/* Known to block (no system call to ask): see SDP_RECV_BLOCK. */
		if (!fill && !(flags & (MSG_DONTWAIT | MSG_PEEK)) && (nonblock == 0 || (nonblock < 0 && nonblock_cached(e) == 0)))
			ef |= SDP_RECV_BLOCK;
		int64_t n = eng.recvv(fd, local, lc, ef);
		if (n < 0 && fill)
			return done;
		if (n > 0) {
			done += n;
			if (done >= total || (flags & MSG_PEEK))
				return done;
			/* Take what else is already here, as the kernel's recv does:
			 * edge-triggered programs (UCX, nginx) take a short read to
			 * mean that nothing is left and wait for the next arrival. */
			fill = !waitall && done >= need;
			continue;
		}
		if (n == 0)
			return done;
		if (n <= -SDP_FALLBACK)
			return after_fallback_recv(fd, e, (int)n, iov, cnt, flags);
		if (n == -EAGAIN) {
			if (nonblock < 0)
				nonblock = (flags & MSG_DONTWAIT) || is_nonblocking(fd);
			if (nonblock) {
				if (done)
					return done;
				errno = EAGAIN;
				return -1;
			}
			int w = wait_ready(fd, POLLIN, 1, &deadline);
			if (w < 0 && w > -SDP_FALLBACK && (ef & SDP_RECV_WAIT) && eng.recv_cancel) {
				/* The engine may have offered these buffers to the
				 * peer (Write ZCopy): take them back before returning. */
				int64_t k = eng.recv_cancel(fd, local, lc);
				if (k > 0)
					return done + (size_t)k;
			}
			if (w == -EINTR || w == -EAGAIN) {
				if (done)
					return done;
				errno = -w;
				return -1;
			}
			if (w < 0 && w > -SDP_FALLBACK) {
				if (done)
					return done;
				errno = reset_once(e, -w, 0);
				return errno ? -1 : 0;
			}
			if (w <= -SDP_FALLBACK) /* while waiting: the engine has let go of fd */
				return done ? (ssize_t)done : after_fallback_recv(fd, e, w, iov, cnt, flags);
			continue;
		}
		if (done)
			return done;
		errno = reset_once(e, (int)-n, 0);
		return errno ? -1 : 0;
	}
}

/* is_sdp_io says whether data calls on e go to the engine. */
static inline int is_sdp_io(struct fdent *e)
{
	int k = atomic_load_explicit(&e->kind, memory_order_relaxed);
	return k == K_SDP || k == K_ACTIVE || k == K_PASSIVE || k == K_CONNECTING;
}

/* via_shim says whether a data call on e goes through sdp_recvv/sdp_sendv:
 * those of the engine, and a TCP one with a pending error to report or a
 * reconnection to settle. */
static inline int via_shim(struct fdent *e)
{
	return is_sdp_io(e) || atomic_load_explicit(&e->sk_err, memory_order_relaxed) ||
	       atomic_load_explicit(&e->reconnecting, memory_order_relaxed);
}

/* shim_knows says what the shim keeps for fd (shim/uring.c): 0 nothing,
 * SHIM_FD_SDP a connection on an SDP port (its bytes are the engine's),
 * SHIM_FD_LISTEN a listener with an SDP twin, SHIM_FD_OTHER anything else. */
int shim_knows(int fd)
{
	struct fdent *e = ours(fd);
	int k = e ? atomic_load(&e->kind) : K_NONE;
	if (k == K_NONE)
		return 0;
	if (is_sdp_io(e))
		return SHIM_FD_SDP;
	return k == K_LISTEN && e->hidden >= 0 ? SHIM_FD_LISTEN : SHIM_FD_OTHER;
}

/* listener_tcp_only closes a listener's SDP twin when its SDP clients
 * could not be accepted (why says what the application did): refused on
 * the SDP port, they use TCP at once instead of waiting there. */
static void listener_tcp_only(int fd, struct fdent *e, const char *why)
{
	if (atomic_load(&e->kind) != K_LISTEN || e->hidden < 0)
		return;
	logmsg(1, "fd %d: %s; SDP port %d closed, clients use TCP", fd, why, sdp_port(e->app_port));
	int h = e->hidden;
	e->hidden = -1;
	entry_reset(h);
	real.close(h);
	e->reason = SDP_REASON_RULE;
	atomic_store(&e->kind, K_TCP);
}

/* shim_listener_tcp_only: the application accepts on fd through io_uring,
 * which the shim does not see (shim/uring.c). */
void shim_listener_tcp_only(int fd)
{
	struct fdent *e = ours(fd);
	if (e)
		listener_tcp_only(fd, e, "accepts through io_uring, where the shim cannot serve SDP");
}

/* shim_connect_tcp_only: the application connects fd through io_uring,
 * which the kernel does to the address it names (shim/uring.c): the
 * connection is TCP's, and the table says so, with why. */
void shim_connect_tcp_only(int fd)
{
	struct fdent *e = ours(fd);
	if (!e || atomic_load(&e->kind) != K_CAND)
		return;
	logmsg(2, "fd %d: connects through io_uring, where the shim cannot make an SDP connection; TCP", fd);
	e->reason = SDP_REASON_RULE;
	atomic_store(&e->kind, K_TCP);
}

/* peer_is_owner checks, for a connection to an SDP port the kernel vouched
 * for (e->patient), that the listener that took it belongs to P's owner: the
 * SDP port could have changed hands between trust_check and connect(). A
 * connection that fails it is left before a byte is sent on it. */
static int peer_is_owner(int fd, struct fdent *e)
{
	if (!e->patient)
		return 1;
	/* Only a listener shown to be another user's is refused: one that is
	 * gone right after the connection was made took nothing of ours. */
	int r = trust_peer((const struct sockaddr *)&e->dst, sdp_port(e->app_port), e->owner_uid);
	if (r == 0)
		logmsg(1, "fd %d: the listener that took the SDP connection is not port %d's owner's; using TCP",
		       fd, e->app_port);
	else if (r < 0)
		logmsg(3, "fd %d: the kernel could not name the listener that took the SDP connection", fd);
	return r != 0;
}

/* resolve_connecting finishes a non-blocking connect to an SDP port once the
 * kernel reports it done: success makes it K_ACTIVE, refusal reconnects to
 * the application's port over TCP. Returns 1 when resolved. */
static int resolve_connecting(int fd, struct fdent *e, short revents)
{
	if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
		return 0;
	int err = 0;
	socklen_t l = sizeof err;
	if (real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
		err = errno;
	if (err == 0) {
		if (!peer_is_owner(fd, e)) {
			int r = fallback(fd, e, SDP_REASON_UNTRUSTED);
			if (r < 0 && errno != EINPROGRESS && !e->so_error)
				e->so_error = errno;
			return 1;
		}
		atomic_store(&e->kind, K_ACTIVE);
		return 1;
	}
	if (err == ECONNREFUSED || err == ECONNRESET) {
		int r = fallback(fd, e, SDP_REASON_REFUSED);
		if (r < 0 && errno != EINPROGRESS && !e->so_error)
			e->so_error = errno;
		return 1;
	}
	/* Unreachable or timed out: TCP to the same host would fare no better.
	 * Leave the error for SO_ERROR by reconnecting plainly. */
	fallback(fd, e, SDP_REASON_TIMEOUT);
	return 1;
}

/* move_high moves a descriptor of the shim's own (a hidden listener) to a
 * high number, away from the application's. */
static int move_high(int fd)
{
	struct rlimit rl;
	int floor = 100;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 256 && rl.rlim_cur / 2 < INT_MAX)
		floor = (int)(rl.rlim_cur / 2);
	int hi = real.fcntl(fd, F_DUPFD_CLOEXEC, floor);
	if (hi < 0)
		return fd;
	real.close(fd);
	return hi;
}

/* shim_hidden marks a hidden listener: an application that closes every
 * descriptor it does not know must not close it. */
static void shim_hidden(int fd)
{
	keep_open(fd);
}

/* ---- hooks: sockets -------------------------------------------------------- */

EXPORT int socket(int domain, int type, int protocol)
{
	need_real();
	int fd = real.socket(domain, type, protocol);
	if (fd >= 0 && (domain == AF_INET || domain == AF_INET6) &&
	    (type & 0xff) == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP)) {
		if (cfg.mode != MODE_TCP || n_rules)
			entry_new(fd, K_CAND, domain);
	}
	return fd;
}

EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	need_real();
	int r = real.bind(fd, addr, len);
	struct fdent *e = ours(fd);
	if (r == 0 && e && len <= sizeof e->bound) {
		memcpy(&e->bound, addr, len);
		e->boundlen = len;
	}
	return r;
}

/* listen_twin gives fd, a TCP listener the shim has as a candidate (e),
 * its SDP twin on S(P), unless a rule or the process says TCP. */
static void listen_twin(int fd, struct fdent *e, int backlog)
{
	struct sockaddr_storage a;
	socklen_t al = sizeof a;
	if (real.getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		return;
	int port = sa_port((struct sockaddr *)&a);
	int mode = rule_mode(ROLE_SERVER, (struct sockaddr *)&a);
	if (mode == MODE_TCP) {
		atomic_store(&e->kind, K_TCP);
		e->reason = SDP_REASON_RULE;
		return;
	}
	if (!engine_usable()) {
		atomic_store(&e->kind, K_TCP);
		e->reason = SDP_REASON_AFTER_FORK;
		return;
	}
	int h = real.socket(e->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h < 0)
		return;
	int one = 1, rp = 0;
	socklen_t rpl = sizeof rp;
	/* The twin always reuses S(P): a restarted server finds it in
	 * TIME_WAIT from its own closes. getsockopt shows the application's. */
	setsockopt(h, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	socklen_t ral = sizeof e->reuse_app;
	if (real.getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &e->reuse_app, &ral) < 0)
		e->reuse_app = 0;
	carry_opts(fd, h);
	/* Listeners that share P by SO_REUSEPORT share S(P) the same way, so the
	 * kernel spreads SDP connections over them as it spreads TCP's. */
	if (real.getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &rp, &rpl) == 0 && rp)
		setsockopt(h, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	if (e->rcvbuf)
		real.setsockopt(h, SOL_SOCKET, SO_RCVBUF, &e->rcvbuf, sizeof e->rcvbuf);
	if (e->sndbuf)
		real.setsockopt(h, SOL_SOCKET, SO_SNDBUF, &e->sndbuf, sizeof e->sndbuf);
	if (e->family == AF_INET6) {
		int v;
		socklen_t l = sizeof v;
		if (real.getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, &l) == 0)
			setsockopt(h, IPPROTO_IPV6, IPV6_V6ONLY, &v, l);
	}
	sa_set_port((struct sockaddr *)&a, sdp_port(port));
	if (real.bind(h, (struct sockaddr *)&a, al) < 0 || real.listen(h, twin_backlog(backlog)) < 0) {
		logmsg(1, "fd %d: cannot listen on SDP port %d for port %d (%s); this listener serves TCP only",
		       fd, sdp_port(port), port, strerror(errno));
		real.close(h);
		atomic_store(&e->kind, K_TCP);
		e->reason = SDP_REASON_SDP_PORT;
		return;
	}
	h = move_high(h);
	hold_engine();
	e->hidden = h;
	e->app_port = port;
	e->sdp_only = mode == MODE_SDP;
	shim_hidden(h);
	atomic_store(&e->kind, K_LISTEN);
	logmsg(2, "fd %d listening on port %d, SDP on port %d", fd, port, sdp_port(port));
}

EXPORT int listen(int fd, int backlog)
{
	need_real();
	int r = real.listen(fd, backlog);
	struct fdent *e = ours(fd);
	if (r != 0 || !e)
		return r;
	int k = atomic_load(&e->kind);
	if (k == K_LISTEN)
		real.listen(e->hidden, twin_backlog(backlog));
	else if (k == K_CAND)
		listen_twin(fd, e, backlog);
	return r;
}

/* adopt_listener gives a TCP listener the shim did not see made (inherited
 * through socket activation, passed by another process) its SDP twin, as
 * listen() would have: SDP clients are then served there instead of
 * finding S(P) closed. how says where it came from. */
static void adopt_listener(int fd, const char *how)
{
	int acc = 0, type = 0, proto = 0, dom = 0;
	socklen_t l = sizeof acc;
	if (ours(fd) || real.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) < 0 || !acc)
		return;
	l = sizeof type;
	if (real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM)
		return;
	l = sizeof proto;
	if (real.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) < 0 || proto != IPPROTO_TCP)
		return;
	l = sizeof dom;
	if (real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 || (dom != AF_INET && dom != AF_INET6))
		return;
	if (cfg.mode == MODE_TCP && !n_rules)
		return;
	struct fdent *e = entry_new(fd, K_CAND, dom);
	if (!e)
		return;
	struct sockaddr_storage a;
	socklen_t al = sizeof a;
	int backlog = real.getsockname(fd, (struct sockaddr *)&a, &al) == 0 ? listener_backlog((struct sockaddr *)&a) : -1;
	logmsg(2, "fd %d: a listener %s", fd, how);
	listen_twin(fd, e, backlog >= 0 ? backlog : SOMAXCONN);
}

/* adopt_activated adopts the listeners a socket activator passed (the
 * LISTEN_FDS protocol of systemd: descriptors 3 to 3 + LISTEN_FDS - 1, for
 * the process LISTEN_PID names). */
static void adopt_activated(void)
{
	const char *n = getenv("LISTEN_FDS"), *pid = getenv("LISTEN_PID");
	if (!n || !*n || (pid && *pid && strtol(pid, NULL, 10) != getpid()))
		return;
	long count = strtol(n, NULL, 10);
	for (long i = 0; i < count && i < 1024; i++)
		adopt_listener(3 + (int)i, "inherited from a socket activator (LISTEN_FDS)");
}

static void accepted_closed(int c, struct fdent *l, int err);

/* accepted_sdp registers a connection accepted on the SDP port and writes
 * the MPA Request at once, so the connecting side learns it reached an SDP
 * peer within one round trip, whatever the application does next. */
static void accepted_sdp(int c, struct fdent *l)
{
	struct fdent *e = entry_new(c, K_PASSIVE, l->family);
	if (!e) {
		logmsg(0, "fd %d beyond the descriptor table; closing it", c);
		return;
	}
	e->passive = 1;
	e->app_port = l->app_port;
	e->nodelay = l->nodelay; /* as TCP's accepted sockets inherit it */
	e->rcvbuf = l->rcvbuf, e->sndbuf = l->sndbuf; /* the kernel's do too */
	e->reuse_shown = l->reuse_app + 1;             /* the twin's is 1 */
	e->lowat = l->lowat; /* not from the twin, which never has it */
	e->reqlen = build_request(e->req, c, l->app_port);
	ssize_t w = real.send(c, e->req, e->reqlen, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w < 0 && errno == ECONNRESET) {
		/* Reset since do_accept looked: this send took the report. */
		accepted_closed(c, l, ECONNRESET);
		return;
	}
	if (w != e->reqlen)
		logmsg(1, "fd %d: could not send the MPA Request: %s", c, w < 0 ? strerror(errno) : "short write");
}

/* accepted_closed registers a connection accepted on the SDP port whose
 * peer had closed it before any byte: a plain socket at end of stream, that
 * shows the application's port like any accepted SDP connection. err is
 * the error the shim's look at it took from the kernel (a reset): the
 * application's next call gets it, as over TCP. */
static void accepted_closed(int c, struct fdent *l, int err)
{
	struct fdent *e = entry_new(c, K_CAND, l->family);
	if (!e)
		return;
	e->passive = 1;
	e->at_eof = 1;
	e->app_port = l->app_port;
	e->reuse_shown = l->reuse_app + 1;
	atomic_store(&e->sk_err, err);
	e->lowat = l->lowat;
	mark_tcp(c, e, SDP_REASON_PEER_CLOSED);
	lowat_to_kernel(c, e);
}

static int do_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct fdent *l = ours(fd);
	if (!l || atomic_load(&l->kind) != K_LISTEN) {
		int c = real.accept4(fd, addr, len, flags);
		if (c >= 0 && l) {
			struct fdent *e = entry_new(c, K_CAND, l->family);
			if (e)
				mark_tcp(c, e, l->reason ? l->reason : SDP_REASON_RULE);
		}
		return c;
	}
	for (;;) {
		int c = real.accept4(l->hidden, addr, len, flags);
		if (c >= 0) {
			/* A connecting side that gave up (and went to TCP) said so
			 * with an MPA Reject: the application never sees it. One that
			 * closed before the handshake is returned plain and at end of
			 * stream, as TCP returns a connection closed before accept():
			 * an MPA Request now would only provoke a reset. */
			uint8_t b[20];
			ssize_t r = real.recv(c, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
			if (r == (ssize_t)sizeof b && !memcmp(b, "MPA ID Rep Frame", 16) && (b[16] & 0x20)) {
				real.close(c);
				continue;
			}
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
				accepted_closed(c, l, r < 0 ? errno : 0);
				return c;
			}
			accepted_sdp(c, l);
			return c;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
			return -1;
		int nb = is_nonblocking(fd);
		if (!nb) {
			struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = l->hidden, .events = POLLIN } };
			if (real.poll(p, 2, -1) < 0)
				return -1;
			/* POLLHUP: fd listens no more (shutdown): its accept says so. */
			if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)))
				continue;
		}
		c = real.accept4(fd, addr, len, flags);
		if (c >= 0 && l->sdp_only) {
			/* A rule says sdp for this listener: a plain client is turned
			 * away as if nothing listened. */
			struct linger lg = { 1, 0 };
			setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
			real.close(c);
			logmsg(2, "fd %d: turned away a TCP client (rule says sdp)", fd);
			if (nb) {
				errno = EAGAIN;
				return -1;
			}
			continue;
		}
		if (c >= 0) {
			struct fdent *e = entry_new(c, K_CAND, l->family);
			if (e) {
				e->passive = 1;
				mark_tcp(c, e, SDP_REASON_PLAIN_PEER);
			}
		}
		return c;
	}
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	need_real();
	if (!ours(fd))
		return real.accept(fd, addr, len);
	return do_accept(fd, addr, len, 0);
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	need_real();
	if (!ours(fd))
		return real.accept4(fd, addr, len, flags);
	return do_accept(fd, addr, len, flags);
}

/* over_conn_cap reports whether the process already has SDP_MAX_CONNECTIONS
 * (unset or 0: no cap) SDP connections, counted in the descriptor table (a
 * scan, done only when a cap is set); a further connect then uses TCP with
 * the reason resource-limit, where a rule allows TCP. */
static int over_conn_cap(void)
{
	int c = cfg.max_conns;
	if (c == 0)
		return 0;
	int n = 0;
	for (int fd = 0; fd < FD_MAX && n < c; fd++) {
		struct fdent *e = atomic_load_explicit(&fdtab[fd], memory_order_acquire);
		int k = e ? atomic_load_explicit(&e->kind, memory_order_relaxed) : K_NONE;
		n += k == K_CONNECTING || k == K_ACTIVE || k == K_PASSIVE || k == K_SDP;
	}
	return n >= c;
}

/* trusted says whether fd may connect to addr's SDP port (shim/trust.c):
 * SDP_REASON_NONE (e->patient when the kernel vouched for the port), or the
 * reason it goes to the application's port over TCP instead, logged. */
static int trusted(int fd, struct fdent *e, const struct sockaddr *addr, int app_port)
{
	char detail[160];
	unsigned uid = 0;
	switch (trust_check(addr, app_port, sdp_port(app_port), detail, sizeof detail, &uid)) {
	case TRUST_SDP:
		e->patient = 1;
		e->owner_uid = uid;
		return SDP_REASON_NONE;
	case TRUST_VOUCHED:
		return SDP_REASON_NONE;
	case TRUST_NO_LISTENER:
		logmsg(3, "fd %d: TCP to port %d: %s", fd, app_port, detail);
		return SDP_REASON_REFUSED;
	case TRUST_NOT_TWIN:
		logmsg(2, "fd %d: TCP to port %d: %s", fd, app_port, detail);
		return SDP_REASON_FOREIGN;
	case TRUST_REMOTE:
		logmsg(2, "fd %d: TCP to port %d: %s", fd, app_port, detail);
		return SDP_REASON_REMOTE;
	default:
		logmsg(1, "fd %d: TCP to port %d, not SDP: %s", fd, app_port, detail);
		return SDP_REASON_UNTRUSTED;
	}
}

EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e)
		return real.connect(fd, addr, len);
	int k = atomic_load(&e->kind);
	if (k == K_CONNECTING) {
		/* A repeated connect() on a connection in progress. */
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (real.poll(&p, 1, 0) > 0 && resolve_connecting(fd, e, p.revents))
			return connect(fd, addr, len);
		errno = EALREADY;
		return -1;
	}
	if (k == K_ACTIVE || k == K_SDP || k == K_PASSIVE) {
		/* The kernel's answer: 0 to the first connect() after a
		 * non-blocking one completed, EISCONN after that. Not AF_UNSPEC,
		 * which would disconnect the transport under the engine. */
		if (addr && len >= sizeof(sa_family_t) && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6))
			return real.connect(fd, addr, len);
		errno = EISCONN;
		return -1;
	}
	if (k != K_CAND || !addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    len > sizeof e->dst)
		return real.connect(fd, addr, len);
	memcpy(&e->dst, addr, len);
	e->dstlen = len;
	e->app_port = sa_port(addr);
	if (!engine_usable()) {
		mark_tcp(fd, e, engine_failed ? SDP_REASON_ENGINE : SDP_REASON_AFTER_FORK);
		return real.connect(fd, addr, len);
	}
	int mode = rule_mode(ROLE_CLIENT, addr);
	if (mode == MODE_TCP) {
		mark_tcp(fd, e, SDP_REASON_RULE);
		return real.connect(fd, addr, len);
	}
	e->sdp_only = mode == MODE_SDP;
	if (mode == MODE_BOTH && neg_lookup(addr)) {
		mark_tcp(fd, e, SDP_REASON_CACHED);
		return real.connect(fd, addr, len);
	}
	if (mode == MODE_BOTH && over_conn_cap()) {
		mark_tcp(fd, e, SDP_REASON_LIMIT);
		return real.connect(fd, addr, len);
	}
	int why = trusted(fd, e, addr, e->app_port);
	if (why != SDP_REASON_NONE) {
		if (e->sdp_only) {
			atomic_store(&e->kind, K_TCP);
			e->reason = why;
			errno = ECONNREFUSED;
			return -1;
		}
		mark_tcp(fd, e, why);
		return real.connect(fd, addr, len);
	}
	struct sockaddr_storage m;
	memcpy(&m, addr, len);
	sa_set_port((struct sockaddr *)&m, sdp_port(e->app_port));
	if (e->lowat > 1) { /* the engine's socket: kept in e (set_rcvlowat) */
		int one = 1;
		real.setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
	}
	int r = real.connect(fd, (struct sockaddr *)&m, len);
	if (r == 0) {
		if (!peer_is_owner(fd, e))
			return fallback(fd, e, SDP_REASON_UNTRUSTED);
		atomic_store(&e->kind, K_ACTIVE);
		return 0;
	}
	int err = errno;
	if (err == EINPROGRESS || err == EINTR) {
		atomic_store(&e->kind, K_CONNECTING);
		errno = err;
		return -1;
	}
	if (err == ECONNREFUSED || err == ECONNRESET)
		return fallback(fd, e, SDP_REASON_REFUSED);
	lowat_to_kernel(fd, e); /* still a candidate: the kernel's again */
	errno = err;
	return -1;
}

/* ---- hooks: data ------------------------------------------------------------ */

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real.read(fd, buf, n);
	struct iovec v = { buf, n };
	return sdp_recvv(fd, e, &v, 1, 0);
}

EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort();
	return read(fd, buf, n);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real.write(fd, buf, n);
	struct iovec v = { (void *)buf, n };
	return sdp_sendv(fd, e, &v, 1, 0);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real.readv(fd, iov, cnt);
	if (cnt < 0 || cnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	return sdp_recvv(fd, e, iov, cnt, 0);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real.writev(fd, iov, cnt);
	if (cnt < 0 || cnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	return sdp_sendv(fd, e, iov, cnt, 0);
}

EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real.recv(fd, buf, n, flags);
	struct iovec v = { buf, n };
	return sdp_recvv(fd, e, &v, 1, flags);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		abort();
	return recv(fd, buf, n, flags);
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr, socklen_t *alen)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real.recvfrom(fd, buf, n, flags, addr, alen);
	struct iovec v = { buf, n };
	ssize_t r = sdp_recvv(fd, e, &v, 1, flags);
	if (r >= 0 && addr && alen)
		*alen = 0; /* a connected stream socket reports no source address */
	return r;
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
			      struct sockaddr *addr, socklen_t *alen)
{
	if (n > buflen)
		abort();
	return recvfrom(fd, buf, n, flags, addr, alen);
}

static int pass_out(const struct msghdr *msg);
static void pass_in(const struct msghdr *msg);

EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e)) {
		ssize_t r = real.recvmsg(fd, msg, flags);
		if (r >= 0 && msg->msg_controllen)
			pass_in(msg); /* descriptors passed by another process (SCM_RIGHTS) */
		return r;
	}
	if (msg->msg_iovlen > IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	ssize_t r = sdp_recvv(fd, e, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (r >= 0) {
		msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	return r;
}

EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real.send(fd, buf, n, flags);
	struct iovec v = { (void *)buf, n };
	return sdp_sendv(fd, e, &v, 1, flags);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr, socklen_t alen)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real.sendto(fd, buf, n, flags, addr, alen);
	struct iovec v = { (void *)buf, n };
	return sdp_sendv(fd, e, &v, 1, flags);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e)) {
		if (msg->msg_controllen && pass_out(msg) < 0)
			return -1; /* a descriptor that cannot be passed (SCM_RIGHTS) */
		return real.sendmsg(fd, msg, flags);
	}
	if (msg->msg_iovlen > IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	return sdp_sendv(fd, e, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

/* ---- hooks: life cycle ---------------------------------------------------- */

static void epset_clear(struct fdent *e);
static void epoll_follow(int fd, struct fdent *e);

/* forget drops what we know of fd before the descriptor goes away. */
static void forget(int fd, struct fdent *e)
{
	int k = atomic_load(&e->kind);
	if (k == K_LISTEN && e->hidden >= 0) {
		entry_reset(e->hidden);
		real.close(e->hidden);
		e->hidden = -1;
	}
	if (e->dupped)
		epoll_follow(fd, e);
	if (k == K_SDP && e->engine_pid == getpid())
		eng.close(fd);
	if (k == K_EPOLL)
		epset_clear(e);
	entry_reset(fd);
}

/* drain_unread reads and drops what the kernel holds for a connection that
 * was never handed to the engine (the peer's MPA Request or Reply) before it
 * is closed, so that the close sends a FIN, as TCP's would, and not the RST
 * the kernel sends for a socket closed with unread bytes: the peer reads end
 * of stream. Only the sole holder of the socket may: a duplicate or a child
 * process may still need those bytes. */
static void drain_unread(int fd, struct fdent *e)
{
	if (e->dupped || e->shared || e->born_forks != atomic_load(&n_forks))
		return;
	/* Only the handshake frame goes: bytes after it are the peer's
	 * application data (a connecting side sends right after its Reply),
	 * and a close with those unread resets, as TCP's does. */
	unsigned char b[512];
	ssize_t n = real.recv(fd, b, sizeof b, MSG_DONTWAIT | MSG_PEEK);
	if (n <= 0)
		return;
	if (n >= 20 && memcmp(b, "MPA ID Re", 9) == 0 &&
	    n > (ssize_t)(20 + ((size_t)b[18] << 8 | b[19])))
		return;
	ssize_t r = real.recv(fd, b, (size_t)n, MSG_DONTWAIT);
	(void)r;
}

EXPORT int close(int fd)
{
	need_real();
	struct fdent *e = ours(fd);
	if ((e || uring_watched()) && shares_parents_memory())
		return real.close(fd); /* a vfork child closing its copy (subprocess's close_fds) */
	uring_forget(fd); /* an io_uring the shim watches (shim/uring.c) */
	if (e) {
		int k = atomic_load(&e->kind);
		if ((k == K_ENGINE && engine_pid == getpid()) || k == K_HIDDEN)
			return 0; /* ours: it stays, and its number stays taken */
		if (k == K_ACTIVE || k == K_PASSIVE)
			drain_unread(fd, e);
		forget(fd, e);
	}
	return real.close(fd);
}

/* dup_ours gives newfd, a fresh duplicate of oldfd, the same standing: a
 * second descriptor of the same SDP connection (the engine is told), of the
 * same listener, or of the same TCP socket. A connection not yet handed to
 * the engine is handed over first, so that both descriptors share one. */
static void dup_ours(int oldfd, int newfd)
{
	struct fdent *o = ours(oldfd);
	if (!o || newfd < 0 || oldfd == newfd)
		return;
	int k = atomic_load(&o->kind);
	if (k == K_EPOLL || k == K_CONNECTING)
		return; /* a duplicate of these is left to the kernel */
	struct fdent *n = entry_new(newfd, K_CAND, o->family);
	if (!n)
		return;
	logmsg(3, "fd %d: duplicate of fd %d (%s)", newfd, oldfd, kind_name(k));
	n->dupped = o->dupped = 1;
	n->passive = o->passive;
	n->app_port = o->app_port;
	n->reason = o->reason;
	n->sdp_only = o->sdp_only;
	n->engine_pid = o->engine_pid;
	n->nodelay = o->nodelay;
	n->patient = o->patient;
	n->cork = o->cork;
	n->rcvbuf = o->rcvbuf, n->sndbuf = o->sndbuf;
	n->reuse_app = o->reuse_app, n->reuse_shown = o->reuse_shown;
	n->lowat = o->lowat;
	n->hidden = -1;
	memcpy(&n->dst, &o->dst, sizeof n->dst);
	n->dstlen = o->dstlen;
	if (k == K_LISTEN) {
		/* Each descriptor of a listener needs its own hidden one. */
		n->hidden = o->hidden >= 0 ? move_high(real.fcntl(o->hidden, F_DUPFD_CLOEXEC, 0)) : -1;
		if (n->hidden >= 0)
			shim_hidden(n->hidden);
		atomic_store(&n->kind, n->hidden >= 0 ? K_LISTEN : K_TCP);
		return;
	}
	if (k == K_SDP && o->engine_pid == getpid() && eng.dup(oldfd, newfd) != 0) {
		atomic_store(&n->kind, K_NONE);
		return;
	}
	if (k == K_ACTIVE || k == K_PASSIVE) {
		/* Not handed to the engine yet (sshd dup2s before exec, where no
		 * engine may be loaded): both stay pending, and whichever is used
		 * first brings the other along (attach_siblings). */
		memcpy(n->req, o->req, o->reqlen);
		n->reqlen = o->reqlen;
		n->shared = o->shared = 1;
	}
	atomic_store(&n->kind, k);
}

EXPORT int dup(int oldfd)
{
	need_real();
	int r = real.dup(oldfd);
	if (r >= 0 && ours(oldfd))
		dup_ours(oldfd, r);
	return r;
}

EXPORT int dup2(int oldfd, int newfd)
{
	need_real();
	if ((ours(newfd) || ours(oldfd)) && shares_parents_memory())
		return real.dup2(oldfd, newfd);
	struct fdent *e = ours(newfd);
	if (e && oldfd != newfd && real.fcntl(oldfd, F_GETFD) >= 0)
		forget(newfd, e);
	int r = real.dup2(oldfd, newfd);
	if (r >= 0 && ours(oldfd))
		dup_ours(oldfd, r);
	return r;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	need_real();
	if ((ours(newfd) || ours(oldfd)) && shares_parents_memory())
		return real.dup3(oldfd, newfd, flags);
	struct fdent *e = ours(newfd);
	if (e && oldfd != newfd && real.fcntl(oldfd, F_GETFD) >= 0)
		forget(newfd, e);
	int r = real.dup3(oldfd, newfd, flags);
	if (r >= 0 && ours(oldfd))
		dup_ours(oldfd, r);
	return r;
}

static int fcntl_common(int fd, int cmd, void *arg)
{
	int r = real.fcntl(fd, cmd, arg);
	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && ours(fd) && !shares_parents_memory())
		dup_ours(fd, r);
	if (cmd == F_SETFL) {
		struct fdent *e = ours(fd);
		if (e)
			nonblock_learnt(e, r < 0 ? -1 : ((long)arg & O_NONBLOCK) != 0);
	}
	return r;
}

/* fcntl's third argument is an int or a pointer; on the ABIs glibc supports
 * both travel in the same register, so it is passed on as a pointer. */
EXPORT int fcntl(int fd, int cmd, ...)
{
	need_real();
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	need_real();
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(fd, cmd, arg);
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	need_real();
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct fdent *e = ours(fd);
	if (e && req == FIONBIO) {
		int r = real.ioctl(fd, req, arg);
		nonblock_learnt(e, r < 0 || !arg ? -1 : *(int *)arg != 0);
		return r;
	}
	if (!e || (req != FIONREAD && req != SIOCOUTQ && req != SIOCATMARK) || !is_sdp_io(e) ||
	    atomic_load(&e->kind) == K_CONNECTING)
		return real.ioctl(fd, req, arg);
	if (attach(fd, e) < 0)
		return -1;
	if (atomic_load(&e->kind) != K_SDP)
		return real.ioctl(fd, req, arg);
	if (!arg) {
		errno = EFAULT;
		return -1;
	}
	int64_t v = eng.query(fd, req == FIONREAD ? SDP_QUERY_INQ : req == SIOCATMARK ? SDP_QUERY_ATMARK : SDP_QUERY_OUTQ);
	if (v < 0 && v > -SDP_FALLBACK) {
		errno = (int)-v;
		return -1;
	}
	if (v < 0)
		v = 0;
	if (req == SIOCOUTQ) {
		int k = 0;
		if (real.ioctl(fd, SIOCOUTQ, &k) == 0)
			v += k;
	}
	*(int *)arg = v > INT_MAX ? INT_MAX : (int)v;
	return 0;
}

/* sendfile to an SDP socket reads the file in pieces through buf and sends
 * them; the file offset ends where the sent bytes end, as with the kernel's. */
static ssize_t sendfile_copy(int out, struct fdent *e, int in, off_t *off, size_t count, char *buf, size_t bsz)
{
	size_t done = 0;
	off_t pos = off ? *off : 0;
	while (done < count) {
		size_t want = count - done < bsz ? count - done : bsz;
		ssize_t r = off ? pread(in, buf, want, pos + done) : real.read(in, buf, want);
		if (r <= 0) {
			if (r < 0 && !done)
				return -1;
			break;
		}
		struct iovec v = { buf, (size_t)r };
		ssize_t w = sdp_sendv(out, e, &v, 1, done ? MSG_DONTWAIT : 0);
		ssize_t sent = w > 0 ? w : 0;
		if (!off && sent < r)
			lseek(in, (off_t)sent - r, SEEK_CUR); /* give back what was not sent */
		done += sent;
		if (w < 0 && !done) {
			if (off)
				*off = pos;
			return -1;
		}
		if (sent < r)
			break;
	}
	if (off)
		*off = pos + done;
	return done;
}

/* The buffer is the call's: one kept per thread was lost when the thread
 * exited (256 KiB each). */
static ssize_t sendfile_sdp(int out, struct fdent *e, int in, off_t *off, size_t count)
{
	const size_t bsz = 256 << 10;
	char *buf = malloc(bsz);
	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	ssize_t r = sendfile_copy(out, e, in, off, count, buf, bsz);
	int err = errno;
	free(buf);
	errno = err;
	return r;
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	need_real();
	struct fdent *e = ours(out);
	if (!e || !is_sdp_io(e))
		return real.sendfile(out, in, off, count);
	return sendfile_sdp(out, e, in, off, count);
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return sendfile(out, in, off, count);
}

/* listener_shutdown: shutdown(SHUT_RD or SHUT_RDWR) of a listener stops it
 * listening, resets its queue and wakes the threads in accept(), which then
 * fail with EINVAL. Its SDP twin goes the same way, first, so that SDP
 * clients are refused too and a waiting do_accept finds neither listening;
 * a later listen() makes both listen again. */
static int listener_shutdown(int fd, struct fdent *e, int how)
{
	int h = e->hidden;
	if (h >= 0 && (how == SHUT_RD || how == SHUT_RDWR))
		real.shutdown(h, how);
	return real.shutdown(fd, how);
}

EXPORT int shutdown(int fd, int how)
{
	need_real();
	struct fdent *e = ours(fd);
	if (e && atomic_load(&e->kind) == K_LISTEN)
		return listener_shutdown(fd, e, how);
	if (!e || !is_sdp_io(e) || atomic_load(&e->kind) == K_CONNECTING)
		return real.shutdown(fd, how);
	if (attach(fd, e) < 0)
		return -1;
	if (atomic_load(&e->kind) == K_TCP)
		return real.shutdown(fd, how);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		errno = EINVAL;
		return -1;
	}
	int r = eng.shutdown(fd, how);
	if (r < 0 && r > -SDP_FALLBACK) {
		errno = -r;
		return -1;
	}
	return 0;
}

EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	need_real();
	int r = real.getsockname(fd, addr, len);
	struct fdent *e = ours(fd);
	if (r == 0 && e && e->passive && (atomic_load(&e->kind) != K_TCP || e->at_eof) &&
	    *len >= sizeof(struct sockaddr_in))
		sa_set_port(addr, e->app_port);
	return r;
}

EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	need_real();
	int r = real.getpeername(fd, addr, len);
	struct fdent *e = ours(fd);
	if (r == 0 && e && !e->passive && *len >= sizeof(struct sockaddr_in)) {
		int k = atomic_load(&e->kind);
		if (k == K_ACTIVE || k == K_SDP || k == K_CONNECTING)
			sa_set_port(addr, e->app_port);
	}
	return r;
}

/* tcp_opt_kept: TCP_NODELAY and TCP_CORK of a socket that carries (or is
 * about to carry) SDP. The transport keeps TCP_NODELAY on and is never
 * corked: RFC 5044 assumes FPDUs do not wait for a timer, and a corked or
 * Nagled FPDU tail waits 40-200 ms. The application's values are kept
 * here instead: getsockopt gives them back, TCP_CORK holds sends as
 * MSG_MORE does (at most 200 ms, as Linux's cork), and a fallback to TCP
 * applies them to the TCP socket. */
static int tcp_opt_kept(struct fdent *e, int level, int name)
{
	if (level != IPPROTO_TCP || (name != TCP_NODELAY && name != TCP_CORK))
		return 0;
	int k = atomic_load(&e->kind);
	return k == K_CONNECTING || k == K_ACTIVE || k == K_PASSIVE || k == K_SDP;
}

/* opt_set follows an option the kernel took: a listener's twin takes
 * what its accepted sockets inherit, and SO_REUSEADDR set on an accepted
 * socket is the kernel's to show again. */
static void opt_set(struct fdent *e, int level, int name, const void *val, socklen_t len)
{
	if (level == SOL_SOCKET && name == SO_REUSEADDR) {
		e->reuse_shown = 0;
		if (val && len >= sizeof(int))
			e->reuse_app = *(const int *)val != 0;
	}
	if (atomic_load(&e->kind) == K_LISTEN && e->hidden >= 0 && is_carried(level, name))
		real.setsockopt(e->hidden, level, name, val, len);
}

/* lowat_cap is what the kernel makes of an SO_RCVLOWAT of v on a TCP
 * socket (tcp_set_rcvlowat): at most half its receive buffer, the one the
 * application set or else tcp_rmem's largest; a negative v is the most. */
static int lowat_cap(int fd, struct fdent *e, int v)
{
	static _Atomic int rmem_max; /* tcp_rmem's third value, read once */
	int cap = 0;
	if (e->rcvbuf) {
		socklen_t l = sizeof cap;
		if (real.getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cap, &l) < 0)
			cap = 0;
	} else if (!(cap = atomic_load(&rmem_max))) {
		FILE *f = fopen("/proc/sys/net/ipv4/tcp_rmem", "re");
		if (f && fscanf(f, "%*d %*d %d", &cap) != 1)
			cap = 0;
		if (f)
			fclose(f);
		atomic_store(&rmem_max, cap);
	}
	if (v < 0)
		v = INT_MAX;
	if (cap > 0 && v > cap / 2)
		v = cap / 2;
	return v ? v : 1;
}

/* set_rcvlowat: SO_RCVLOWAT. The engine reads an SDP connection's frames
 * from its kernel socket and polls it: a low-water mark there could leave
 * a frame's tail unread for ever. So the shim keeps the value (poll and
 * recv honour it, lowat_poll) and gives it to the kernel only if the
 * connection falls back to TCP. A socket not decided yet and a listener
 * have it in the kernel too (plain accepted sockets inherit it there);
 * connect() takes it off before the socket goes to an SDP port. */
static int set_rcvlowat(int fd, struct fdent *e, const void *val, socklen_t len)
{
	int k = atomic_load(&e->kind);
	if (k == K_CAND || k == K_LISTEN) {
		int r = real.setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, val, len);
		socklen_t l = sizeof e->lowat;
		if (r == 0 && real.getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &e->lowat, &l) < 0)
			e->lowat = 1;
		return r;
	}
	if (k != K_CONNECTING && k != K_ACTIVE && k != K_PASSIVE && k != K_SDP)
		return real.setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, val, len);
	if (len < (socklen_t)sizeof(int) || !val) {
		errno = val ? EINVAL : EFAULT;
		return -1;
	}
	e->lowat = lowat_cap(fd, e, *(const int *)val);
	return 0;
}

EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	need_real();
	struct fdent *e = ours(fd);
	if (e && level == SOL_SOCKET && (name == SO_RCVBUF || name == SO_SNDBUF) && val && len >= sizeof(int)) {
		/* A listener's buffer sizes are its accepted sockets': its SDP
		 * twin gets them too, now and when it is made (listen). */
		int r = real.setsockopt(fd, level, name, val, len);
		if (r == 0) {
			*(name == SO_RCVBUF ? &e->rcvbuf : &e->sndbuf) = *(const int *)val;
			int k = atomic_load(&e->kind);
			if (k == K_LISTEN && e->hidden >= 0)
				real.setsockopt(e->hidden, level, name, val, len);
			if (k == K_SDP && e->engine_pid == getpid() && eng.set_buffers)
				eng.set_buffers(fd, e->sndbuf, e->rcvbuf);
		}
		return r;
	}
	if (e && level == SOL_SOCKET && name == SO_RCVLOWAT)
		return set_rcvlowat(fd, e, val, len);
	if (!e)
		return real.setsockopt(fd, level, name, val, len);
	if (level != IPPROTO_TCP || (name != TCP_NODELAY && name != TCP_CORK)) {
		int r = real.setsockopt(fd, level, name, val, len);
		if (r == 0)
			opt_set(e, level, name, val, len);
		return r;
	}
	if (!tcp_opt_kept(e, level, name)) {
		/* Not decided yet (or TCP): the kernel's, remembered for later. */
		int r = real.setsockopt(fd, level, name, val, len);
		if (r == 0)
			*(name == TCP_NODELAY ? &e->nodelay : &e->cork) = *(const int *)val != 0;
		return r;
	}
	if (!val || len < (socklen_t)sizeof(int)) {
		errno = val ? EINVAL : EFAULT;
		return -1;
	}
	int v = *(const int *)val != 0;
	if (name == TCP_NODELAY) {
		e->nodelay = v;
		return 0;
	}
	int was = e->cork;
	e->cork = v;
	if (was > 0 && !v && atomic_load(&e->kind) == K_SDP && eng.sendv_flags && e->engine_pid == my_pid())
		eng.sendv_flags(fd, NULL, 0, 0); /* uncorked: what was held goes now */
	return 0;
}

EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	need_real();
	struct fdent *e = ours(fd);
	if (e && level == SOL_SOCKET && name == SO_ERROR && atomic_load(&e->kind) == K_CONNECTING) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (real.poll(&p, 1, 0) > 0)
			resolve_connecting(fd, e, p.revents);
	}
	if (e && tcp_opt_kept(e, level, name) && val && len && *len >= sizeof(int)) {
		*(int *)val = (name == TCP_NODELAY ? e->nodelay : e->cork) > 0;
		*len = sizeof(int);
		return 0;
	}
	if (e && level == SOL_SOCKET && name == SO_RCVLOWAT && is_sdp_io(e) && val && len && *len >= sizeof(int)) {
		*(int *)val = e->lowat; /* set_rcvlowat */
		*len = sizeof(int);
		return 0;
	}
	if (e && level == SOL_SOCKET && name == SO_ERROR && atomic_load(&e->kind) == K_SDP &&
	    e->engine_pid == my_pid() && val && len && *len >= sizeof(int)) {
		/* The kernel's pending error, or the engine's (its own read may have
		 * taken the kernel's): a reset read here is reported, as by TCP, so
		 * later calls see EPIPE or end of stream (reset_once). */
		int r = real.getsockopt(fd, level, name, val, len);
		if (r == 0 && *(int *)val == 0) {
			int64_t q = eng.query(fd, SDP_QUERY_ERROR);
			if (q > 0 && (q != ECONNRESET || !atomic_load(&e->reset_told)))
				*(int *)val = (int)q;
		}
		if (r == 0 && *(int *)val == ECONNRESET)
			atomic_store(&e->reset_told, 1);
		return r;
	}
	if (e && e->reuse_shown && level == SOL_SOCKET && name == SO_REUSEADDR && val && len && *len >= sizeof(int)) {
		*(int *)val = e->reuse_shown - 1;
		*len = sizeof(int);
		return 0;
	}
	if (e && level == SOL_SOCKET && name == SO_ERROR && atomic_load(&e->reconnecting))
		settle_reconnect(fd, e, 0);
	if (e && level == SOL_SOCKET && name == SO_ERROR && atomic_load(&e->sk_err) && val && len &&
	    *len >= sizeof(int)) {
		*(int *)val = atomic_exchange(&e->sk_err, 0);
		*len = sizeof(int);
		return 0;
	}
	if (e && level == SOL_SOCKET && name == SO_ERROR && e->so_error && val && len && *len >= sizeof(int)) {
		*(int *)val = e->so_error;
		*len = sizeof(int);
		e->so_error = 0;
		return 0;
	}
	return real.getsockopt(fd, level, name, val, len);
}

/* ---- hooks: readiness ------------------------------------------------------ */

static int epoll_peek(struct epset *ep);
static int epset_count(struct epset *ep);

/* poll_special says whether poll() must look at fd itself rather than
 * leave it to the kernel: SDP sockets, and epoll sets with SDP members. */
static inline int poll_special(int fd)
{
	struct fdent *e = ours(fd);
	if (!e)
		return 0;
	int k = atomic_load_explicit(&e->kind, memory_order_relaxed);
	if (k == K_EPOLL)
		return e->ep && epset_count(e->ep) > 0;
	if (k == K_TCP) /* its pending error shows as POLLERR until reported */
		return atomic_load_explicit(&e->sk_err, memory_order_relaxed) != 0;
	return k != K_CAND && k != K_ENGINE && k != K_HIDDEN;
}


/* poll_emulated implements poll() for a set with SDP descriptors: those are
 * asked of the engine (their data may sit in user space), the rest and the
 * kernel sockets under SDP descriptors are polled by the kernel, and the
 * loop repeats until something the application asked for is ready. */
static int poll_emulated(struct pollfd *fds, nfds_t n, int timeout)
{
	struct pollfd kstack[64];
	int mstack[64];
	unsigned char rstack[64] = { 0 };
	struct pollfd *k = kstack;
	int *map = mstack;
	unsigned char *slept = rstack; /* the engine counts fds[i]'s connection as slept on */
	if (n * 2 > 64) {
		k = malloc(sizeof *k * n * 2);
		map = malloc(sizeof *map * n * 2);
		slept = calloc(n, 1);
		if (!k || !map || !slept) {
			free(k);
			free(map);
			free(slept);
			errno = ENOMEM;
			return -1;
		}
	}
	int64_t deadline = timeout >= 0 ? now_ms() + timeout : -1;
	int result;
	for (;;) {
		int nk = 0, ready = 0, tmo = -1;
		for (nfds_t i = 0; i < n; i++) {
			struct pollfd *p = &fds[i];
			p->revents = 0;
			if (p->fd < 0)
				continue;
			struct fdent *e = ours(p->fd);
			int kind = e ? atomic_load(&e->kind) : K_NONE;
			if (kind == K_ACTIVE || kind == K_PASSIVE) {
				if (attach(p->fd, e) < 0) {
					p->revents = POLLERR;
					ready++;
					continue;
				}
				kind = atomic_load(&e->kind);
			}
			if (kind == K_SDP && e->engine_pid != my_pid()) {
				p->revents = POLLERR | POLLHUP;
				ready++;
				continue;
			}
			if (kind == K_SDP) {
				pid_t t = my_tid(), last = atomic_exchange(&e->last_tid, t);
				if (last && last != t)
					atomic_store(&e->threads, 1);
				int kw = 0, et = -1, efd = -1;
				uint32_t edges;
				int f = p->events | SDP_POLL_SLEEP | (slept[i] ? SDP_POLL_WOKE : 0);
				int r = e->lowat > 1 && (p->events & POLLIN) ? lowat_poll(p->fd, e->lowat, f, &kw, &et, &efd, &edges)
									    : eng.poll(p->fd, f, &kw, &et, &efd, &edges);
				slept[i] = 0;
				if (r <= -SDP_FALLBACK) {
					fallback(p->fd, e, reason_of(r));
					kind = K_TCP;
				} else if (r < 0) {
					p->revents = POLLERR;
					ready++;
					continue;
				} else if (r & (p->events | POLLERR | POLLHUP)) {
					p->revents = r & (p->events | POLLERR | POLLHUP);
					ready++;
					continue;
				} else {
					k[nk] = (struct pollfd){ .fd = p->fd, .events = (short)(kw ? kw : POLLIN) };
					map[nk++] = i;
					if (efd >= 0) {
						k[nk] = (struct pollfd){ .fd = efd, .events = POLLIN };
						map[nk++] = i;
						slept[i] = 1;
					}
					if (et >= 0 && (tmo < 0 || et < tmo))
						tmo = et;
					if (atomic_load(&e->threads) && (tmo < 0 || tmo > SHARED_WAIT_MS))
						tmo = SHARED_WAIT_MS;
					continue;
				}
			}
			if (kind == K_CONNECTING) {
				k[nk] = (struct pollfd){ .fd = p->fd, .events = POLLOUT };
				map[nk++] = i;
				continue;
			}
			if (kind == K_EPOLL && e->ep && (p->events & POLLIN) && epoll_peek(e->ep)) {
				p->revents = POLLIN; /* an SDP member is ready */
				ready++;
				continue;
			}
			k[nk] = (struct pollfd){ .fd = p->fd, .events = p->events };
			map[nk++] = i;
			if (kind == K_LISTEN && e->hidden >= 0 && (p->events & POLLIN)) {
				k[nk] = (struct pollfd){ .fd = e->hidden, .events = POLLIN };
				map[nk++] = i;
			}
		}
		int wait = tmo;
		if (ready) {
			wait = 0;
		} else if (deadline >= 0) {
			int64_t left = deadline - now_ms();
			if (left < 0)
				left = 0;
			if (wait < 0 || left < wait)
				wait = (int)left;
		}
		int r = real.poll(k, nk, wait);
		if (r < 0) {
			result = -1;
			break;
		}
		for (int j = 0; j < nk && r > 0; j++) {
			if (!k[j].revents)
				continue;
			struct pollfd *p = &fds[map[j]];
			struct fdent *e = ours(p->fd);
			int kind = e ? atomic_load(&e->kind) : K_NONE;
			if (kind == K_SDP) {
				if (k[j].fd != p->fd && (k[j].revents & POLLIN))
					drain_wakeups(k[j].fd);
				continue; /* asked again on the next round */
			}
			if (kind == K_CONNECTING) {
				if (resolve_connecting(p->fd, e, k[j].revents)) {
					if (atomic_load(&e->kind) == K_ACTIVE)
						p->revents |= POLLOUT & p->events;
					else if (e->so_error)
						p->revents |= (POLLOUT & p->events) | POLLERR | POLLHUP;
				}
				continue;
			}
			if (k[j].fd != p->fd) /* the hidden SDP listener: POLLHUP is fd's own to give */
				p->revents |= k[j].revents & POLLIN;
			else
				p->revents |= k[j].revents;
			if (kind == K_TCP && atomic_load(&e->reconnecting))
				settle_reconnect(p->fd, e, 0);
			if (kind == K_TCP && atomic_load(&e->sk_err))
				p->revents |= POLLERR;
		}
		ready = 0;
		for (nfds_t i = 0; i < n; i++)
			if (fds[i].revents)
				ready++;
		if (ready || (deadline >= 0 && now_ms() >= deadline)) {
			result = ready;
			break;
		}
	}
	int saved = errno;
	for (nfds_t i = 0; i < n; i++) {
		if (slept[i]) {
			int kw, et, efd;
			uint32_t edges;
			eng.poll(fds[i].fd, SDP_POLL_WOKE, &kw, &et, &efd, &edges);
		}
	}
	errno = saved;
	if (k != kstack) {
		free(k);
		free(map);
		free(slept);
	}
	return result;
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	need_real();
	for (nfds_t i = 0; i < n; i++)
		if (poll_special(fds[i].fd))
			return poll_emulated(fds, n, timeout);
	return real.poll(fds, n, timeout);
}

EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		abort();
	return poll(fds, n, timeout);
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	need_real();
	int special = 0;
	for (nfds_t i = 0; i < n && !special; i++)
		special = poll_special(fds[i].fd);
	if (!special)
		return real.ppoll(fds, n, ts, mask);
	sigset_t old;
	if (mask)
		pthread_sigmask(SIG_SETMASK, mask, &old);
	int tmo = ts ? (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000) : -1;
	int r = poll_emulated(fds, n, tmo);
	int saved = errno;
	if (mask)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return r;
}

/* select_emulated runs a select() that involves SDP descriptors through
 * poll_emulated. */
static int select_emulated(int nfds, fd_set *r, fd_set *w, fd_set *x, int timeout)
{
	struct pollfd stack[64], *p = stack;
	int n = 0;
	for (int fd = 0; fd < nfds; fd++)
		if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (x && FD_ISSET(fd, x)))
			n++;
	if (n > 64 && !(p = malloc(sizeof *p * n))) {
		errno = ENOMEM;
		return -1;
	}
	n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (x && FD_ISSET(fd, x))
			ev |= POLLPRI;
		if (ev)
			p[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	int rc = poll_emulated(p, n, timeout);
	if (rc >= 0) {
		rc = 0;
		if (r)
			FD_ZERO(r);
		if (w)
			FD_ZERO(w);
		if (x)
			FD_ZERO(x);
		for (int i = 0; i < n; i++) {
			short re = p[i].revents;
			if (re & POLLNVAL) {
				rc = -1;
				errno = EBADF;
				break;
			}
			if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(p[i].fd, r);
				rc++;
			}
			if (w && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
				FD_SET(p[i].fd, w);
				rc++;
			}
			if (x && (p[i].events & POLLPRI) && (re & POLLPRI)) {
				FD_SET(p[i].fd, x);
				rc++;
			}
		}
	}
	if (p != stack)
		free(p);
	return rc;
}

static int select_special(int nfds, fd_set *r, fd_set *w, fd_set *x)
{
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (x && FD_ISSET(fd, x))) && poll_special(fd))
			return 1;
	return 0;
}

EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *x, struct timeval *tv)
{
	need_real();
	if (nfds > FD_SETSIZE || !select_special(nfds, r, w, x))
		return real.select(nfds, r, w, x, tv);
	int tmo = tv ? (int)(tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000) : -1;
	int64_t start = now_ms();
	int rc = select_emulated(nfds, r, w, x, tmo);
	if (tv && tmo >= 0) { /* Linux reports the time left */
		int64_t left = tmo - (now_ms() - start);
		if (left < 0)
			left = 0;
		tv->tv_sec = left / 1000;
		tv->tv_usec = (left % 1000) * 1000;
	}
	return rc;
}

EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *x, const struct timespec *ts, const sigset_t *mask)
{
	need_real();
	if (nfds > FD_SETSIZE || !select_special(nfds, r, w, x))
		return real.pselect(nfds, r, w, x, ts, mask);
	sigset_t old;
	if (mask)
		pthread_sigmask(SIG_SETMASK, mask, &old);
	int tmo = ts ? (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000) : -1;
	int rc = select_emulated(nfds, r, w, x, tmo);
	int saved = errno;
	if (mask)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return rc;
}


/* ---- hooks: epoll ---------------------------------------------------------
 *
 * The application's epoll instance stays a kernel one. Kernel descriptors,
 * TCP sockets and listeners (with their hidden SDP listener, registered with
 * the same data) are left to the kernel. An SDP connection's readiness lives
 * in the engine, so it is registered here (struct epreg) and its socket is
 * put into the kernel set edge-triggered for input with a tagged data word,
 * only to wake epoll_wait when bytes arrive (credits, too, arrive as input;
 * room in a full socket is found by the engine, which rings the
 * connection's eventfd, also in the set). epoll_wait asks the
 * engine about every registered SDP descriptor, then waits in the kernel,
 * and turns tagged kernel events into a fresh question to the engine.
 * The eventfd joins the set at the first look, whatever is ready then: the
 * socket's edge alone is not enough, since an engine goroutine (async
 * progress, the flush of queued bytes) may read the arrival before
 * epoll_wait collects it, and the kernel drops an edge whose socket has
 * nothing to report by then.
 */

#define EP_TAG 0x5d9f000000000000ULL
#define EP_TAG_MASK 0xffff000000000000ULL

struct epreg {
	int fd;
	uint32_t gen;     /* the descriptor's generation when registered */
	uint32_t events;  /* what the application asked for */
	epoll_data_t data;
	uint32_t last;    /* edge-triggered: what was ready at the last look */
	int kfired;       /* the kernel saw activity since the last look */
	int efd;          /* the connection's eventfd once added to the set, or -1 */
	uint32_t edges;   /* the connection's arrival count at the last look */
	uint32_t wfull;   /* the connection's full-transport count at the last look */
	uint32_t kmask;   /* what the kernel watches the socket for (EP_KBASE, EPOLLOUT) */
	int disabled;     /* EPOLLONESHOT fired, until EPOLL_CTL_MOD */
};

/* What the kernel watches an SDP connection's socket for in an epoll set:
 * arrivals; and room (EPOLLOUT) while the engine waits for it to pass on
 * what the application's sends left queued, so that a set waiting in the
 * kernel wakes when the transport drains (eng.poll's kernel wait). */
#define EP_KBASE (EPOLLIN | EPOLLRDHUP | EPOLLET)

struct epset {
	pthread_mutex_t mu;
	struct epreg *regs;
	int n, cap;
};

static int epset_count(struct epset *ep)
{
	return ep->n;
}

static uint64_t ep_tag(int fd, uint32_t gen)
{
	return EP_TAG | ((uint64_t)gen << 16) | (uint16_t)fd;
}

static void epset_clear(struct fdent *e)
{
	struct epset *ep = e->ep;
	if (!ep)
		return;
	pthread_mutex_lock(&ep->mu);
	ep->n = 0;
	pthread_mutex_unlock(&ep->mu);
}

static struct epset *epset_of(int epfd)
{
	struct fdent *e = ours(epfd);
	if (!e || atomic_load(&e->kind) != K_EPOLL)
		return NULL;
	return e->ep;
}

static int track_epoll(int fd)
{
	if (fd < 0)
		return fd;
	struct fdent *e = entry_new(fd, K_EPOLL, 0);
	if (e && !e->ep) {
		struct epset *ep = calloc(1, sizeof *ep);
		if (ep) {
			pthread_mutex_init(&ep->mu, NULL);
			e->ep = ep;
		}
	}
	if (e && !e->ep)
		atomic_store(&e->kind, K_NONE);
	return fd;
}

EXPORT int epoll_create(int size)
{
	need_real();
	return track_epoll(real.epoll_create(size));
}

EXPORT int epoll_create1(int flags)
{
	need_real();
	return track_epoll(real.epoll_create1(flags));
}

static struct epreg *epreg_find(struct epset *ep, int fd)
{
	for (int i = 0; i < ep->n; i++)
		if (ep->regs[i].fd == fd)
			return &ep->regs[i];
	return NULL;
}

static void epreg_remove(struct epset *ep, struct epreg *r)
{
	*r = ep->regs[--ep->n];
}

/* is_sdp_conn says whether epoll registrations of fd are kept here: SDP
 * connections, and sockets that may still become one (a registration made
 * before connect() must follow the socket onto SDP). */
static int is_sdp_conn(int k)
{
	return k == K_SDP || k == K_ACTIVE || k == K_PASSIVE || k == K_CONNECTING || k == K_CAND || k == K_EPOLL;
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	need_real();
	struct epset *ep = epset_of(epfd);
	struct fdent *e = ours(fd);
	if (!ep || !e)
		return real.epoll_ctl(epfd, op, fd, ev);
	int k = atomic_load(&e->kind);
	if (k == K_LISTEN) {
		int r = real.epoll_ctl(epfd, op, fd, ev);
		if (r == 0 && e->hidden >= 0) {
			struct epoll_event hev = { 0 };
			if (ev) {
				hev = *ev;
				hev.events &= EPOLLIN | EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE | EPOLLWAKEUP;
			}
			real.epoll_ctl(epfd, op, e->hidden, op == EPOLL_CTL_DEL ? NULL : &hev);
		}
		return r;
	}
	pthread_mutex_lock(&ep->mu);
	struct epreg *r = epreg_find(ep, fd);
	if (r && r->gen != atomic_load(&e->gen)) {
		epreg_remove(ep, r); /* a registration of a closed descriptor */
		r = NULL;
	}
	int rc = 0, err = 0;
	if (!is_sdp_conn(k) && !(k == K_TCP && atomic_load(&e->sk_err)) && !r) {
		pthread_mutex_unlock(&ep->mu);
		return real.epoll_ctl(epfd, op, fd, ev);
	}
	switch (op) {
	case EPOLL_CTL_ADD:
		if (r) {
			err = EEXIST;
			break;
		}
		if (!ev) {
			err = EFAULT;
			break;
		}
		if (ep->n == ep->cap) {
			int cap = ep->cap ? ep->cap * 2 : 16;
			struct epreg *nr = realloc(ep->regs, sizeof *nr * cap);
			if (!nr) {
				err = ENOMEM;
				break;
			}
			ep->regs = nr;
			ep->cap = cap;
		}
		uint32_t gen = atomic_load(&e->gen);
		struct epoll_event kev = { .events = EP_KBASE, .data.u64 = ep_tag(fd, gen) };
		if (real.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &kev) < 0) {
			err = errno;
			break;
		}
		ep->regs[ep->n++] = (struct epreg){ .fd = fd, .gen = gen, .events = ev->events, .data = ev->data, .kfired = 1, .efd = -1,
						    .wfull = atomic_load(&e->wfull), .kmask = EP_KBASE };
		break;
	case EPOLL_CTL_MOD:
		if (!r) {
			err = ENOENT;
			break;
		}
		if (!ev) {
			err = EFAULT;
			break;
		}
		r->events = ev->events;
		r->data = ev->data;
		r->disabled = 0;
		r->last = 0;
		r->kfired = 1;
		break;
	case EPOLL_CTL_DEL:
		if (!r) {
			err = ENOENT;
			break;
		}
		if (r->efd >= 0)
			real.epoll_ctl(epfd, EPOLL_CTL_DEL, r->efd, NULL);
		epreg_remove(ep, r);
		real.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		break;
	default:
		err = EINVAL;
	}
	pthread_mutex_unlock(&ep->mu);
	if (err) {
		errno = err;
		rc = -1;
	}
	return rc;
}

/* tcp_ready: the events of a plain TCP socket with a pending error (POLLERR,
 * as the kernel shows its own), or one reported: it stays in the emulated
 * set, where edge-triggered waiters see no new edge (handed to the kernel's
 * set, it would be reported once more); -1 (for the kernel's set) when it
 * has none. */
static int tcp_ready(int fd, struct fdent *e, short want, uint32_t *edges)
{
	int err = atomic_load(&e->sk_err) != 0;
	if (!err && !atomic_load(&e->reset_told))
		return -1;
	*edges = 0; /* no more arrivals on a connection that is over */
	struct pollfd p = { .fd = fd, .events = want };
	real.poll(&p, 1, 0);
	return p.revents | (err ? POLLERR : 0);
}

/* sdp_ready returns the poll events ready on an SDP connection, driving it
 * (attach, finishing a connect, falling back) as poll_emulated does. It
 * returns -1 when the descriptor has become a plain TCP socket. */
static int sdp_ready(int fd, struct fdent *e, short want, int *kwait, int *tmo, int *efd, uint32_t *edges)
{
	*kwait = 0;
	*tmo = -1;
	*efd = -1;
	*edges = 0;
	int k = atomic_load(&e->kind);
	if (k == K_EPOLL) { /* an epoll set inside this one */
		if (e->ep && epoll_peek(e->ep))
			return POLLIN;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		return real.poll(&p, 1, 0) > 0 ? p.revents : 0;
	}
	if (k == K_CAND) { /* not decided yet: the kernel socket tells */
		struct pollfd p = { .fd = fd, .events = want };
		return real.poll(&p, 1, 0) > 0 ? p.revents : 0;
	}
	if (k == K_CONNECTING) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (real.poll(&p, 1, 0) <= 0 || !resolve_connecting(fd, e, p.revents))
			return 0;
		k = atomic_load(&e->kind);
	}
	if (k == K_TCP)
		return tcp_ready(fd, e, want, edges);
	if (k == K_LISTEN)
		return -1;
	if (k == K_ACTIVE || k == K_PASSIVE) {
		if (attach(fd, e) < 0)
			return POLLERR;
		k = atomic_load(&e->kind);
		if (k == K_TCP)
			return tcp_ready(fd, e, want, edges);
	}
	if (k != K_SDP)
		return POLLNVAL;
	if (e->engine_pid != my_pid())
		return POLLERR | POLLHUP;
	int r = e->lowat > 1 && (want & POLLIN) ? lowat_poll(fd, e->lowat, want, kwait, tmo, efd, edges)
						: eng.poll(fd, want, kwait, tmo, efd, edges);
	if (r <= -SDP_FALLBACK) {
		fallback(fd, e, reason_of(r));
		return tcp_ready(fd, e, want, edges);
	}
	return r < 0 ? POLLERR : r;
}

/* epoll_scan collects the ready SDP registrations into out. */
static int epoll_scan(int epfd, struct epset *ep, struct epoll_event *out, int max, int *tmo)
{
	int n = 0;
	pthread_mutex_lock(&ep->mu);
	urg_hold++; /* SIGURG after the unlock */
	for (int i = 0; i < ep->n && n < max; i++) {
		struct epreg *r = &ep->regs[i];
		struct fdent *e = ours(r->fd);
		if (!e || atomic_load(&e->gen) != r->gen) {
			epreg_remove(ep, r); /* closed: the kernel dropped its part */
			i--;
			continue;
		}
		if (r->disabled)
			continue;
		int kw, et, efd;
		uint32_t edges;
		int ready = sdp_ready(r->fd, e, (short)(r->events & 0xffff), &kw, &et, &efd, &edges);
		if (efd >= 0 && efd != r->efd) {
			/* Wake this set too when another thread moves the connection. */
			struct epoll_event wev = { .events = EPOLLIN | EPOLLET, .data.u64 = ep_tag(r->fd, r->gen) };
			if (real.epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &wev) == 0 || errno == EEXIST)
				r->efd = efd;
		}
		if (ready < 0) {
			/* Now plain TCP on a fresh socket: the kernel takes over. */
			struct epoll_event kev = { .events = r->events & ~EPOLLEXCLUSIVE, .data = r->data };
			if (real.epoll_ctl(epfd, EPOLL_CTL_ADD, r->fd, &kev) < 0 && errno == EEXIST)
				real.epoll_ctl(epfd, EPOLL_CTL_MOD, r->fd, &kev);
			if (atomic_load(&e->kind) == K_LISTEN && e->hidden >= 0) {
				kev.events &= EPOLLIN | EPOLLET | EPOLLONESHOT;
				real.epoll_ctl(epfd, EPOLL_CTL_ADD, e->hidden, &kev);
			}
			epreg_remove(ep, r);
			i--;
			continue;
		}
		if (et >= 0 && (*tmo < 0 || et < *tmo))
			*tmo = et;
		uint32_t kmask = EP_KBASE | ((kw & POLLOUT) ? EPOLLOUT : 0);
		if (kmask != r->kmask) {
			struct epoll_event kev = { .events = kmask, .data.u64 = ep_tag(r->fd, r->gen) };
			if (real.epoll_ctl(epfd, EPOLL_CTL_MOD, r->fd, &kev) == 0)
				r->kmask = kmask;
		}
		uint32_t rep = (uint32_t)ready & (r->events | EPOLLERR | EPOLLHUP);
		uint32_t report = rep;
		uint32_t wfull = atomic_load(&e->wfull);
		if (wfull != r->wfull) {
			r->last &= ~(uint32_t)EPOLLOUT; /* a send found it full since */
			r->wfull = wfull;
		}
		if (r->events & EPOLLET) {
			/* Again only what became ready, or what saw a new arrival. */
			report = (rep & ~r->last) | (edges != r->edges ? rep : 0);
			r->last = rep;
		}
		r->edges = edges;
		r->kfired = 0;
		if (!report)
			continue;
		out[n].events = report;
		out[n].data = r->data;
		n++;
		if (r->events & EPOLLONESHOT)
			r->disabled = 1;
	}
	pthread_mutex_unlock(&ep->mu);
	urg_unhold();
	return n;
}

/* epoll_follow moves the epoll registrations of fd, about to be closed, to
 * another descriptor of the same socket: the kernel keeps a registration as
 * long as the open file lives, whichever descriptor made it. */
static void epoll_follow(int fd, struct fdent *e)
{
	struct stat a, b;
	if (fstat(fd, &a) < 0)
		return;
	int other = -1;
	for (int i = 0; i < FD_MAX && other < 0; i++) {
		struct fdent *o = i == fd ? NULL : atomic_load_explicit(&fdtab[i], memory_order_acquire);
		if (o && o->dupped && atomic_load(&o->kind) != K_NONE && fstat(i, &b) == 0 &&
		    b.st_ino == a.st_ino && b.st_dev == a.st_dev)
			other = i;
	}
	if (other < 0)
		return;
	uint32_t gen = atomic_load(&e->gen), ngen = atomic_load(&fdtab[other]->gen);
	for (int i = 0; i < FD_MAX; i++) {
		struct fdent *x = atomic_load_explicit(&fdtab[i], memory_order_acquire);
		if (!x || atomic_load(&x->kind) != K_EPOLL || !x->ep)
			continue;
		pthread_mutex_lock(&x->ep->mu);
		struct epreg *r = epreg_find(x->ep, fd);
		if (r && r->gen == gen && !epreg_find(x->ep, other)) {
			r->fd = other;
			r->gen = ngen;
			r->kfired = 1;
		}
		pthread_mutex_unlock(&x->ep->mu);
	}
}

/* epoll_peek says whether epoll_wait on ep would report one of its SDP
 * members now, without consuming anything (an epoll set polled or nested). */
static int epoll_peek(struct epset *ep)
{
	int found = 0;
	pthread_mutex_lock(&ep->mu);
	urg_hold++; /* SIGURG after the unlock */
	for (int i = 0; i < ep->n && !found; i++) {
		struct epreg *r = &ep->regs[i];
		struct fdent *e = ours(r->fd);
		if (r->disabled || !e || atomic_load(&e->gen) != r->gen || atomic_load(&e->kind) == K_EPOLL)
			continue;
		int kw, et, efd;
		uint32_t edges;
		int ready = sdp_ready(r->fd, e, (short)(r->events & 0xffff), &kw, &et, &efd, &edges);
		uint32_t rep = ready > 0 ? (uint32_t)ready & (r->events | EPOLLERR | EPOLLHUP) : 0;
		uint32_t last = atomic_load(&e->wfull) != r->wfull ? r->last & ~(uint32_t)EPOLLOUT : r->last;
		if (r->events & EPOLLET)
			rep = (rep & ~last) | (edges != r->edges ? rep : 0);
		found = rep != 0;
	}
	pthread_mutex_unlock(&ep->mu);
	urg_unhold();
	return found;
}

static void epoll_mark(struct epset *ep, uint64_t tag)
{
	int fd = (int)(tag & 0xffff);
	uint32_t gen = (uint32_t)(tag >> 16);
	pthread_mutex_lock(&ep->mu);
	struct epreg *r = epreg_find(ep, fd);
	if (r && r->gen == gen)
		r->kfired = 1;
	pthread_mutex_unlock(&ep->mu);
}

static int epoll_emulated(int epfd, struct epset *ep, struct epoll_event *events, int max, int timeout,
			  const sigset_t *mask)
{
	if (max <= 0) {
		errno = EINVAL;
		return -1;
	}
	int64_t deadline = timeout >= 0 ? now_ms() + timeout : -1;
	struct epoll_event kstack[64], *kev = kstack;
	if (max > 64 && !(kev = malloc(sizeof *kev * max))) {
		errno = ENOMEM;
		return -1;
	}
	int result;
	for (;;) {
		int tmo = -1;
		int n = epoll_scan(epfd, ep, events, max, &tmo);
		int wait = n ? 0 : tmo;
		if (!n && deadline >= 0) {
			int64_t left = deadline - now_ms();
			if (left < 0)
				left = 0;
			if (wait < 0 || left < wait)
				wait = (int)left;
		}
		int kn = mask ? real.epoll_pwait(epfd, kev, max - n > 0 ? max - n : 1, wait, mask)
			      : real.epoll_wait(epfd, kev, max - n > 0 ? max - n : 1, wait);
		if (kn < 0) {
			result = n ? n : -1;
			break;
		}
		int marked = 0;
		for (int j = 0; j < kn; j++) {
			if ((kev[j].data.u64 & EP_TAG_MASK) == EP_TAG) {
				epoll_mark(ep, kev[j].data.u64);
				marked = 1;
			} else if (n < max) {
				events[n++] = kev[j];
			}
		}
		if (n) {
			result = n;
			break;
		}
		if (!marked && deadline >= 0 && now_ms() >= deadline) {
			result = 0;
			break;
		}
	}
	if (kev != kstack)
		free(kev);
	return result;
}

EXPORT int epoll_wait(int epfd, struct epoll_event *events, int max, int timeout)
{
	need_real();
	struct epset *ep = epset_of(epfd);
	if (!ep || !ep->n)
		return real.epoll_wait(epfd, events, max, timeout);
	return epoll_emulated(epfd, ep, events, max, timeout, NULL);
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int max, int timeout, const sigset_t *mask)
{
	need_real();
	struct epset *ep = epset_of(epfd);
	if (!ep || !ep->n)
		return real.epoll_pwait(epfd, events, max, timeout, mask);
	return epoll_emulated(epfd, ep, events, max, timeout, mask);
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int max, const struct timespec *ts,
			const sigset_t *mask)
{
	need_real();
	int tmo = ts ? (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000) : -1;
	struct epset *ep = epset_of(epfd);
	if (!ep || !ep->n) {
		static int (*pw2)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
		if (!pw2)
			pw2 = dlsym(RTLD_NEXT, "epoll_pwait2");
		if (pw2)
			return pw2(epfd, events, max, ts, mask);
		return real.epoll_pwait(epfd, events, max, tmo, mask);
	}
	return epoll_emulated(epfd, ep, events, max, tmo, mask);
}



/* ---- hooks: batches, splice, close_range ---------------------------------- */

EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	need_real();
	static int (*real_sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	if (!real_sendmmsg)
		real_sendmmsg = dlsym(RTLD_NEXT, "sendmmsg");
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real_sendmmsg(fd, vec, vlen, flags);
	unsigned int i;
	for (i = 0; i < vlen; i++) {
		ssize_t n = sdp_sendv(fd, e, vec[i].msg_hdr.msg_iov, (int)vec[i].msg_hdr.msg_iovlen, flags);
		if (n < 0)
			return i ? (int)i : -1;
		vec[i].msg_len = (unsigned int)n;
		if ((size_t)n < iov_total(vec[i].msg_hdr.msg_iov, (int)vec[i].msg_hdr.msg_iovlen)) {
			i++;
			break;
		}
	}
	return (int)i;
}

EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *tmo)
{
	need_real();
	static int (*real_recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
	if (!real_recvmmsg)
		real_recvmmsg = dlsym(RTLD_NEXT, "recvmmsg");
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real_recvmmsg(fd, vec, vlen, flags, tmo);
	unsigned int i;
	for (i = 0; i < vlen; i++) {
		/* After the first message, MSG_WAITFORONE makes the rest non-blocking. */
		int f = flags & ~MSG_WAITFORONE;
		if (i && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		ssize_t n = sdp_recvv(fd, e, vec[i].msg_hdr.msg_iov, (int)vec[i].msg_hdr.msg_iovlen, f);
		if (n < 0)
			return i ? (int)i : -1;
		vec[i].msg_len = (unsigned int)n;
		vec[i].msg_hdr.msg_namelen = 0;
		vec[i].msg_hdr.msg_controllen = 0;
		vec[i].msg_hdr.msg_flags = 0;
		if (n == 0) {
			i++;
			break;
		}
	}
	return (int)i;
}

/* splice with an SDP socket at one end goes through a buffer: its bytes are
 * not in the kernel socket's queue. Reading from the socket takes no more
 * than the pipe can hold, so nothing read is ever dropped. */
EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len, unsigned int flags)
{
	need_real();
	static ssize_t (*real_splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);
	if (!real_splice)
		real_splice = dlsym(RTLD_NEXT, "splice");
	struct fdent *ei = ours(in), *eo = ours(out);
	int sdp_in = ei && is_sdp_io(ei), sdp_out = eo && is_sdp_io(eo);
	if (!sdp_in && !sdp_out)
		return real_splice(in, off_in, out, off_out, len, flags);
	char buf[65536];
	if (len > sizeof buf)
		len = sizeof buf;
	int nb = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
	if (sdp_in) {
		if (off_in) {
			errno = ESPIPE;
			return -1;
		}
		int cap = real.fcntl(out, F_GETPIPE_SZ), queued = 0;
		if (cap > 0 && real.ioctl(out, FIONREAD, &queued) == 0) {
			if (cap - queued <= 0) {
				errno = EAGAIN;
				return -1;
			}
			if ((size_t)(cap - queued) < len)
				len = (size_t)(cap - queued);
		}
		struct iovec v = { buf, len };
		ssize_t n = sdp_recvv(in, ei, &v, 1, nb);
		if (n <= 0)
			return n;
		for (ssize_t o = 0; o < n;) {
			ssize_t w = off_out ? pwrite(out, buf + o, n - o, *off_out + o) : real.write(out, buf + o, n - o);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return o ? o : -1;
			o += w;
		}
		if (off_out)
			*off_out += n;
		return n;
	}
	ssize_t n = off_in ? pread(in, buf, len, *off_in) : real.read(in, buf, len);
	if (n <= 0)
		return n;
	if (off_in)
		*off_in += n;
	struct iovec v = { buf, (size_t)n };
	return sdp_sendv(out, eo, &v, 1, 0); /* all of it: what was read cannot be put back */
}

/* close_range closes our descriptors one by one (each needs its goodbye)
 * and leaves the engine's own open. */
EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	need_real();
	static int (*real_close_range)(unsigned int, unsigned int, int);
	if (!real_close_range)
		real_close_range = dlsym(RTLD_NEXT, "close_range");
	if (!real_close_range) {
		errno = ENOSYS;
		return -1;
	}
	if (flags & CLOSE_RANGE_CLOEXEC)
		return real_close_range(first, last, flags);
	unsigned int start = first;
	for (unsigned int fd = first; fd <= last && fd < FD_MAX; fd++) {
		struct fdent *e = ours((int)fd);
		if (!e)
			continue;
		if (fd > start && real_close_range(start, fd - 1, flags) < 0)
			return -1;
		close((int)fd);
		start = fd + 1;
	}
	if (start <= last && start >= first)
		return real_close_range(start, last, flags);
	return 0;
}

/* closefrom: glibc's makes the close_range system call itself, past the hook
 * above, and would close the log and the engine's descriptors (ssh and sshd
 * call it at start). */
EXPORT void closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	if (close_range((unsigned int)lowfd, ~0U, 0) == 0)
		return;
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > FD_MAX)
		max = FD_MAX;
	for (int fd = lowfd; fd < max; fd++)
		close(fd);
}

/* ---- hooks: exec ------------------------------------------------------------
 *
 * execve replaces the process image and with it the descriptor table, but
 * not the descriptors. sshd accepts a connection, dup2s it onto 0 and 1 and
 * re-executes itself, so a connection accepted but not yet used must arrive
 * in the new image still known as SDP. Before exec, what the table knows of
 * every descriptor that survives exec is written into LIBSDP_INHERIT; the
 * new image reads it back when the shim starts. A connection the engine
 * already drove cannot follow (its state lived in the old image): the new
 * image knows it as SDP, gets EIO on use and logs why.
 */

#define INHERIT_VAR "LIBSDP_INHERIT"

/* env_preloads_us says whether a program started with envp loads this
 * shim: LD_PRELOAD names a file of the same name as ours. A program that
 * does not cannot accept on a listener's SDP port, which then must not
 * outlive the exec (its clients would wait there for ever). */
static int env_preloads_us(char *const envp[])
{
	static char self[PATH_MAX];
	if (!self[0]) {
		Dl_info info;
		const char *slash;
		if (!dladdr((void *)env_preloads_us, &info) || !info.dli_fname)
			return 1; /* cannot tell: as before, keep what follows exec */
		slash = strrchr(info.dli_fname, '/');
		snprintf(self, sizeof self, "%s", slash ? slash + 1 : info.dli_fname);
	}
	for (size_t i = 0; envp && envp[i]; i++) {
		if (strncmp(envp[i], "LD_PRELOAD=", 11))
			continue;
		const char *p = envp[i] + 11;
		while (*p) {
			size_t n = strcspn(p, ": ");
			const char *base = p;
			for (size_t j = 0; j < n; j++)
				if (p[j] == '/')
					base = p + j + 1;
			size_t bl = (size_t)(p + n - base);
			if (bl == strlen(self) && !strncmp(base, self, bl))
				return 1;
			p += n;
			p += strspn(p, ": ");
		}
	}
	return 0;
}

static char *inherit_string(int preloaded)
{
	size_t cap = 256, len = 0;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	len = snprintf(out, cap, INHERIT_VAR "=1");
	for (int fd = 0; fd < FD_MAX; fd++) {
		struct fdent *e = atomic_load_explicit(&fdtab[fd], memory_order_acquire);
		if (!e)
			continue;
		int k = atomic_load(&e->kind);
		if (k != K_PASSIVE && k != K_ACTIVE && k != K_LISTEN && k != K_SDP)
			continue;
		int fl = real.fcntl(fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		if (k == K_LISTEN && e->hidden >= 0 && !preloaded) {
			logmsg(2, "fd %d: the program exec'd without libsdp: SDP port %d closes, clients use TCP", fd,
			       sdp_port(e->app_port));
			continue; /* its SDP twin, close-on-exec, goes with the old image */
		}
		if (k == K_LISTEN && e->hidden >= 0) /* the hidden listener goes too */
			real.fcntl(e->hidden, F_SETFD, 0);
		size_t need = len + 64 + 2 * (size_t)e->reqlen;
		if (need > cap) {
			cap = need * 2;
			char *n = realloc(out, cap);
			if (!n) {
				free(out);
				return NULL;
			}
			out = n;
		}
		len += snprintf(out + len, cap - len, ";%d,%d,%d,%d,%u,%d,", fd, k, e->family, e->passive,
				e->app_port, k == K_LISTEN ? e->hidden : -1);
		if (k == K_PASSIVE)
			for (int i = 0; i < e->reqlen; i++)
				len += snprintf(out + len, cap - len, "%02x", e->req[i]);
		if (k == K_SDP)
			logmsg(1, "fd %d: an SDP connection in use cannot follow exec; the new program gets EIO on it", fd);
	}
	return out;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* adopt_record makes fd what one record of inherit_string (or of a passed
 * descriptor, pass_in) says it was: its kind, family, ports and, for a
 * connection accepted on an SDP port, the MPA Request sent on it (hex).
 * Returns 0, or -1 when fd is not a stream socket (not the socket it was). */
static int adopt_record(int fd, int k, int fam, int passive, unsigned port, int hidden, const char *hex)
{
	int type = 0;
	socklen_t tl = sizeof type;
	if (real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM)
		return -1;
	struct fdent *e = entry_new(fd, K_CAND, fam);
	if (!e)
		return -1;
	e->passive = passive;
	e->app_port = (uint16_t)port;
	e->shared = 1;
	if (k == K_LISTEN) {
		if (hidden >= 0) {
			real.fcntl(hidden, F_SETFD, FD_CLOEXEC);
			e->hidden = hidden;
			shim_hidden(hidden);
		}
		atomic_store(&e->kind, hidden >= 0 ? K_LISTEN : K_TCP);
		return 0;
	}
	if (k == K_PASSIVE) {
		int i = 0;
		while (i < REQ_MAX && hexval(hex[0]) >= 0 && hexval(hex[1]) >= 0) {
			e->req[i++] = (uint8_t)(hexval(hex[0]) << 4 | hexval(hex[1]));
			hex += 2;
		}
		e->reqlen = i;
	}
	if (k == K_SDP)
		e->engine_pid = -1; /* driven by the old image: unusable here */
	atomic_store(&e->kind, k == K_PASSIVE || k == K_ACTIVE || k == K_SDP ? k : K_TCP);
	return 0;
}

/* adopt_inherited rebuilds the table from LIBSDP_INHERIT after exec. */
static void adopt_inherited(void)
{
	const char *v = getenv(INHERIT_VAR);
	if (!v || strncmp(v, "1", 1))
		return;
	for (const char *p = strchr(v, ';'); p; p = strchr(p + 1, ';')) {
		int fd, k, fam, passive, hidden, n = 0;
		unsigned port;
		if (sscanf(p + 1, "%d,%d,%d,%d,%u,%d,%n", &fd, &k, &fam, &passive, &port, &hidden, &n) < 6 || !n)
			continue;
		adopt_record(fd, k, fam, passive, port, hidden, p + 1 + n);
	}
	unsetenv(INHERIT_VAR);
}

/* ---- descriptors passed to another process (SCM_RIGHTS) ------------------
 *
 * A connection accepted on an SDP port, or connected to one, that no call
 * has handed to the engine yet (K_PASSIVE, K_ACTIVE) can be passed over a
 * Unix socket to another process, as Node's cluster module and servers with
 * worker processes do with each accepted connection. The receiving process
 * needs what the shim knows of it (the MPA Request sent on it): the sender
 * leaves that in a record named after the socket (device and inode) in a
 * directory of the user's own, and the receiver's recvmsg takes it, so its
 * first call hands the connection to its own engine. A connection the
 * engine already drives (K_SDP) cannot follow: its state is in this
 * process; such a sendmsg fails with EOPNOTSUPP and a log line, never
 * giving the other process a socket that reads protocol bytes. */

#define PASS_STALE_S 60 /* a record nobody took (the receiver not preloaded) */

static int pass_dir(char *out, size_t n, int create)
{
	unsigned uid = (unsigned)geteuid();
	snprintf(out, n, "/dev/shm/libsdp-pass-%u", uid);
	if (create && mkdir(out, 0700) < 0 && errno != EEXIST)
		return -1;
	struct stat st;
	/* Another user's directory (made first, to read or plant records) is
	 * never used. */
	if (lstat(out, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077))
		return -1;
	return 0;
}

static int pass_name(char *out, size_t n, int fd)
{
	struct stat st;
	char dir[64];
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) || pass_dir(dir, sizeof dir, 0) < 0)
		return -1;
	snprintf(out, n, "%s/%lx-%lx", dir, (unsigned long)st.st_dev, (unsigned long)st.st_ino);
	return 0;
}

/* pass_sweep removes records older than PASS_STALE_S, at most every few
 * seconds. */
static void pass_sweep(const char *dir)
{
	static _Atomic time_t last;
	time_t now = time(NULL);
	if (now - atomic_load(&last) < 10)
		return;
	atomic_store(&last, now);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	char buf[4096];
	long n;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0)
		for (long off = 0; off < n;) {
			struct {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *d = (void *)(buf + off);
			struct stat st;
			if (d->name[0] != '.' && fstatat(dfd, d->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    now - st.st_mtime > PASS_STALE_S)
				unlinkat(dfd, d->name, 0);
			off += d->reclen;
		}
	real.close(dfd);
}

/* pass_fds calls f for each descriptor of msg's SCM_RIGHTS messages; it
 * stops when f returns nonzero and returns that. */
static int pass_fds(const struct msghdr *msg, int (*f)(int fd))
{
	if (!msg->msg_control || msg->msg_controllen < sizeof(struct cmsghdr))
		return 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)msg); c; c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
			int r = f(fd);
			if (r)
				return r;
		}
	}
	return 0;
}

static int pass_check(int fd)
{
	struct fdent *e = ours(fd);
	int k = e ? atomic_load(&e->kind) : K_NONE;
	if (k == K_SDP || k == K_CONNECTING) {
		logmsg(0, "fd %d: an SDP connection in use cannot be passed to another process (SCM_RIGHTS): its state "
			  "is in this process; pass it before its first read or write, or keep the program on TCP "
			  "(SDP_MODE=tcp or a libsdp.conf rule)", fd);
		return 1;
	}
	return 0;
}

static int pass_record(int fd)
{
	struct fdent *e = ours(fd);
	int k = e ? atomic_load(&e->kind) : K_NONE;
	if (k == K_LISTEN) {
		/* The other process would accept on P but never on the SDP port. */
		listener_tcp_only(fd, e, "a listener passed to another process");
		return 0;
	}
	if (k != K_PASSIVE && k != K_ACTIVE)
		return 0;
	char dir[64], path[128], rec[64 + 2 * REQ_MAX];
	if (pass_dir(dir, sizeof dir, 1) < 0 || pass_name(path, sizeof path, fd) < 0) {
		logmsg(1, "fd %d: cannot leave its SDP state for the process it is passed to (%s)", fd, strerror(errno));
		return 0;
	}
	pass_sweep(dir);
	int len = snprintf(rec, sizeof rec, "%d,%d,%d,%u,", k, e->family, e->passive, e->app_port);
	for (int i = 0; k == K_PASSIVE && i < e->reqlen; i++)
		len += snprintf(rec + len, sizeof rec - len, "%02x", e->req[i]);
	unlink(path);
	int rfd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (rfd < 0 || real.write(rfd, rec, len) != len)
		logmsg(1, "fd %d: cannot write %s: %s", fd, path, strerror(errno));
	if (rfd >= 0)
		real.close(rfd);
	e->shared = 1; /* another process holds it now: its unread bytes are not ours to drop */
	return 0;
}

/* pass_out runs before a sendmsg that carries descriptors: -1 (errno set)
 * when one of them cannot be passed. */
static int pass_out(const struct msghdr *msg)
{
	if (pass_fds(msg, pass_check)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	pass_fds(msg, pass_record);
	return 0;
}

static int pass_take(int fd)
{
	char path[128], rec[64 + 2 * REQ_MAX + 1];
	if (pass_name(path, sizeof path, fd) < 0)
		return 0;
	int rfd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0) {
		/* a plain socket, or one its sender did not know; a listener
		 * serves SDP here (its sender's twin was closed when it went) */
		adopt_listener(fd, "passed from another process");
		return 0;
	}
	struct stat st;
	ssize_t n = fstat(rfd, &st) == 0 && st.st_uid == geteuid() ? real.read(rfd, rec, sizeof rec - 1) : -1;
	real.close(rfd);
	unlink(path);
	int k, fam, passive, used = 0;
	unsigned port;
	if (n <= 0)
		return 0;
	rec[n] = 0;
	if (sscanf(rec, "%d,%d,%d,%u,%n", &k, &fam, &passive, &port, &used) < 4 || !used ||
	    (k != K_PASSIVE && k != K_ACTIVE) || adopt_record(fd, k, fam, passive, port, -1, rec + used) < 0)
		logmsg(1, "fd %d: passed to this process with an SDP record it cannot use", fd);
	else
		logmsg(2, "fd %d: an SDP connection passed from another process", fd);
	return 0;
}

/* pass_in runs after a recvmsg that received descriptors. */
static void pass_in(const struct msghdr *msg)
{
	pass_fds(msg, pass_take);
}

/* ---- descriptors taken from another process (pidfd_getfd) ---------------
 *
 * pidfd_getfd copies a descriptor out of another process without that
 * process knowing: nothing of the shim's state comes along. A listener
 * serves SDP here if its SDP port is free (adopt_listener); a connection on
 * an SDP port (the kernel says whose: the same check a client makes before
 * it connects) has its state in the other process, so using it here fails
 * with EIO and a log line, never reading a protocol byte. */

static int app_port_of(int sdp)
{
	int span = 65536 - 1024;
	return ((sdp - 1024 - cfg.port_offset) % span + span) % span + 1024;
}

/* on_sdp_port says whether a is an address on an SDP port S(P) that is P's
 * SDP twin, by the kernel's word. */
static int on_sdp_port(const struct sockaddr *a)
{
	int s = sa_port(a);
	char detail[160];
	unsigned uid;
	return s > 0 && trust_check(a, app_port_of(s), s, detail, sizeof detail, &uid) == TRUST_SDP;
}

static void taken_fd(int fd)
{
	adopt_listener(fd, "taken from another process (pidfd_getfd)");
	if (ours(fd))
		return;
	int dom = 0, type = 0;
	socklen_t l = sizeof dom;
	if (real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 || (dom != AF_INET && dom != AF_INET6))
		return;
	l = sizeof type;
	if (real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM)
		return;
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof me, pl = sizeof peer;
	if (real.getsockname(fd, (struct sockaddr *)&me, &ml) < 0 || real.getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
		return;
	if (!on_sdp_port((struct sockaddr *)&me) && !on_sdp_port((struct sockaddr *)&peer))
		return;
	struct fdent *e = entry_new(fd, K_SDP, dom);
	if (!e)
		return;
	e->engine_pid = -1; /* another process's: unusable here */
	logmsg(0, "fd %d: an SDP connection taken from another process (pidfd_getfd): its state is in that "
		  "process, so using it here fails with EIO; pass it over a Unix socket (SCM_RIGHTS) before its "
		  "first use, or keep the program on TCP (SDP_MODE=tcp or a libsdp.conf rule)", fd);
}

EXPORT int pidfd_getfd(int pidfd, int targetfd, unsigned int flags)
{
	int fd = (int)shim_syscall7(SYS_pidfd_getfd, pidfd, targetfd, flags, 0, 0, 0);
	if (fd >= 0) {
		int saved = errno;
		taken_fd(fd);
		errno = saved;
	}
	return fd;
}

/* env_with_inherit returns envp without any old LIBSDP_INHERIT and with the
 * current one (or envp itself when there is nothing to pass on). */
static char **env_with_inherit(char *const envp[], char **var)
{
	*var = inherit_string(env_preloads_us(envp));
	if (!*var || !strchr(*var, ';')) {
		free(*var);
		*var = NULL;
		return (char **)envp;
	}
	size_t n = 0;
	while (envp && envp[n])
		n++;
	char **out = malloc(sizeof *out * (n + 2));
	if (!out)
		return (char **)envp;
	size_t j = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], INHERIT_VAR "=", sizeof INHERIT_VAR))
			out[j++] = envp[i];
	out[j++] = *var;
	out[j] = NULL;
	return out;
}

/* EXEC_INHERITING runs call (which uses env) with LIBSDP_INHERIT added to
 * envp; it returns only if exec failed. */
#define EXEC_INHERITING(envp, call)                                \
	do {                                                       \
		char *var_;                                        \
		char **env = env_with_inherit((envp), &var_);      \
		int r_ = (call);                                   \
		int saved_ = errno;                                \
		if (env != (char **)(envp))                        \
			free(env);                                 \
		free(var_);                                        \
		errno = saved_;                                    \
		return r_;                                         \
	} while (0)

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	static int (*real_execve)(const char *, char *const[], char *const[]);
	need_real();
	if (!real_execve)
		real_execve = dlsym(RTLD_NEXT, "execve");
	EXEC_INHERITING(envp, real_execve(path, argv, env));
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	static int (*real_execvpe)(const char *, char *const[], char *const[]);
	need_real();
	if (!real_execvpe)
		real_execvpe = dlsym(RTLD_NEXT, "execvpe");
	EXEC_INHERITING(envp, real_execvpe(file, argv, env));
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	static int (*real_fexecve)(int, char *const[], char *const[]);
	need_real();
	if (!real_fexecve)
		real_fexecve = dlsym(RTLD_NEXT, "fexecve");
	EXEC_INHERITING(envp, real_fexecve(fd, argv, env));
}

EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* collect_args turns execl's variable arguments into an argv array. */
#define COLLECT_ARGS(first, ap, argv)                                      \
	do {                                                               \
		size_t n_ = 1, cap_ = 16;                                  \
		argv = malloc(sizeof(char *) * cap_);                      \
		if (!argv) {                                               \
			errno = ENOMEM;                                    \
			return -1;                                         \
		}                                                          \
		argv[0] = (char *)(first);                                 \
		for (char *a_; (a_ = va_arg(ap, char *)) != NULL;) {       \
			if (n_ + 1 >= cap_) {                              \
				char **m_ = realloc(argv, sizeof(char *) * (cap_ *= 2)); \
				if (!m_) {                                 \
					free(argv);                        \
					errno = ENOMEM;                    \
					return -1;                         \
				}                                          \
				argv = m_;                                 \
			}                                                  \
			argv[n_++] = a_;                                   \
		}                                                          \
		argv[n_] = NULL;                                           \
	} while (0)

EXPORT int execl(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;
	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	int r = execve(path, argv, environ);
	free(argv);
	return r;
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	char **argv;
	va_list ap;
	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	int r = execvpe(file, argv, environ);
	free(argv);
	return r;
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;
	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	int r = execve(path, argv, envp);
	free(argv);
	return r;
}

/* ---- process life ---------------------------------------------------------- */

/* A child's statistics are its own: it starts with no connections counted. */
static void count_fork(void)
{
	atomic_fetch_add(&n_forks, 1);
	claims_map();
}

static void child_after_fork(void)
{
	cached_pid = getpid();
	atomic_store(&n_tcp_conns, 0);
	atomic_store(&n_sockets, 0);
	for (int i = 0; i < SDP_REASON_MAX; i++)
		atomic_store(&n_reasons[i], 0);
}

__attribute__((constructor)) static void shim_init(void)
{
	need_real();
	cached_pid = getpid();
	cfg.log_fd = 2;
	read_config();
	adopt_inherited();
	adopt_activated();
	pthread_atfork(count_fork, NULL, child_after_fork);
}

/* ---- _exit ---------------------------------------------------------------
 *
 * _exit and _Exit skip atexit handlers and destructors, where the engine's
 * exit flush runs (shim_fini): a process that closes a connection and calls
 * _exit at once (a forked worker, an event loop's last act) would take the
 * socket with it while the peer still acknowledges, and the kernel's reset
 * would drop the bytes it has not delivered yet. So they wait here, bounded,
 * until the engine reports every closed connection settled (settling), then
 * exit. Nothing here calls into the engine or takes a lock: a signal handler
 * may call _exit while the interrupted thread holds one; the engine's own
 * threads finish the connections and count down. */

#define SETTLE_MAX_MS 10000

static _Atomic int n_settling;

static void shim_settling(int delta)
{
	atomic_fetch_add(&n_settling, delta);
}

static void settle_before_exit(void)
{
	if (engine_pid == 0 || engine_pid != getpid() || shares_parents_memory())
		return; /* no engine here, or the parent's */
	for (int ms = 0; ms < SETTLE_MAX_MS && atomic_load(&n_settling) > 0; ms++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

EXPORT void _exit(int status)
{
	settle_before_exit();
	for (;;)
		shim_syscall7(SYS_exit_group, status, 0, 0, 0, 0, 0);
}

EXPORT void _Exit(int status)
{
	_exit(status);
}

__attribute__((destructor)) static void shim_fini(void)
{
	if (engine_pid == getpid() && eng.exit)
		eng.exit(); /* a forked child never calls into its parent's engine */
	if (!cfg.stats || (!atomic_load(&n_sockets) && engine_pid != getpid()))
		return; /* this process used no TCP socket */
	char eng_line[768] = "sdp_conns=0 fpdus_tx=0 fpdus_rx=0 markers_tx=0 markers_rx=0 crc_bytes_rx=0 "
			     "crc_errors=0 payload_tx=0 payload_rx=0";
	if (engine_pid == getpid() && eng.stats)
		eng.stats(eng_line, sizeof eng_line);
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "libsdp: stats pid=%d prog=%s tcp_conns=%llu %s engine=%s\n",
			 (int)getpid(), program_invocation_short_name,
			 (unsigned long long)atomic_load(&n_tcp_conns), eng_line,
			 engine_pid == getpid() ? "loaded" : "not-loaded");
	if (n > (int)sizeof buf)
		n = sizeof buf;
	ssize_t w = real.write(cfg.log_fd, buf, n);
	(void)w;
}
