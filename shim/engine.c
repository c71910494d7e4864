/* shim/engine.c: loading the Go engine, once per process. */
#include "shim.h"

/* ---- the engine ------------------------------------------------------ */

/* Calls of the application into the engine go through eng; a function
 * added here gets a counting wrapper in urg_wrap (SIGURG). */

struct shim_engine eng;

pid_t engine_pid;   /* process that loaded the engine, 0: none */
int engine_failed;
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

void hold_engine(void)
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
pid_t cached_pid;

/* The program's name as it was exec'd. program_invocation_short_name points
 * into argv[0], which programs that set their title (PostgreSQL's backends,
 * nginx's workers, setproctitle) write over: read later it names the title
 * ("127.0.0.1(57410) idle"), so rules, statistics and logs use this copy,
 * taken by the constructor. */
static char prog_copy[64];

void prog_name_init(void)
{
	snprintf(prog_copy, sizeof prog_copy, "%s", program_invocation_short_name);
}

const char *prog_name(void)
{
	return prog_copy[0] ? prog_copy : program_invocation_short_name;
}

/* engine_open dlopens the engine: through the descriptor held open since the
 * constructor (hold_engine) when there is one, else by its path. */
static void *engine_open(char *path, size_t n)
{
	void *h = NULL;
	if (engine_fd >= 0) {
		char held[64];
		snprintf(held, sizeof held, "/proc/self/fd/%d", engine_fd);
		h = dlopen(held, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			logmsg(1, "cannot load the SDP engine through fd %d (%s); trying its path", engine_fd, dlerror());
	}
	if (!h && engine_path(path, n) == 0)
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	return h;
}

/* The engine's functions as loaded. Those about one connection are called
 * through wrappers that count the call in the connection's entry once it
 * has returned (fdent.touched): the engine may have read the socket or
 * changed the connection's state, which an epoll set must then ask about
 * again (epoll.c, epoll_scan). Counted after the call, so that a look that
 * sees the count sees what the call did. */
static struct shim_engine loaded;

/* The application's threads that have called into the engine and not
 * ended: the engine keeps a P of its runtime for each (eng.threads,
 * preload/procs.go, which keeps the highest count). A thread counts once,
 * after its first call; its end (the key's destructor) takes it off. */
static __thread char thread_counted;
static pthread_key_t thread_key;
static pthread_once_t thread_once = PTHREAD_ONCE_INIT;
static atomic_int threads_now;

static void thread_ended(void *p)
{
	(void)p;
	atomic_fetch_sub(&threads_now, 1);
}

static void thread_key_init(void)
{
	pthread_key_create(&thread_key, thread_ended);
}

static void count_thread(void)
{
	thread_counted = 1;
	if (!loaded.threads || engine_pid != my_pid())
		return; /* an engine without the call; a fork's child, which never calls it */
	pthread_once(&thread_once, thread_key_init);
	if (pthread_setspecific(thread_key, (void *)1) != 0)
		return;
	loaded.threads(atomic_fetch_add(&threads_now, 1) + 1);
}

static void touched(int fd)
{
	if (!thread_counted)
		count_thread();
	struct fdent *e = ours(fd);
	if (e)
		fd_touched(e);
}

/* engine_depth counts this thread's calls into the engine that have not
 * returned: _exit (exec.c) must not call into the engine from a signal
 * handler that interrupted one, which may hold the engine's locks. */
__thread int engine_depth;

#define TOUCH_WRAP(ret, name, params, args) \
	static ret t_##name params               \
	{                                        \
		engine_depth++;                  \
		ret r_ = loaded.name args;       \
		engine_depth--;                  \
		touched(fd);                     \
		return r_;                       \
	}
TOUCH_WRAP(int, attach, (int fd, int role, const uint8_t *req, int len), (fd, role, req, len))
TOUCH_WRAP(int64_t, sendv, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
TOUCH_WRAP(int64_t, sendv_flags, (int fd, const struct iovec *iov, int cnt, int flags), (fd, iov, cnt, flags))
TOUCH_WRAP(int64_t, recvv, (int fd, const struct iovec *iov, int cnt, int flags), (fd, iov, cnt, flags))
TOUCH_WRAP(int, poll, (int fd, int want, int *wait, int *tmo, int *efd, uint32_t *edges), (fd, want, wait, tmo, efd, edges))
TOUCH_WRAP(int, shutdown, (int fd, int how), (fd, how))
TOUCH_WRAP(int64_t, query, (int fd, int what), (fd, what))
TOUCH_WRAP(int64_t, take_early, (int fd, char *buf, int len), (fd, buf, len))
TOUCH_WRAP(int64_t, recv_cancel, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
TOUCH_WRAP(int64_t, send_cancel, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
TOUCH_WRAP(int, set_buffers, (int fd, int snd, int rcv), (fd, snd, rcv))

/* dup makes newfd another descriptor of oldfd's connection: both counted. */
static int t_dup(int oldfd, int newfd)
{
	engine_depth++;
	int r = loaded.dup(oldfd, newfd);
	engine_depth--;
	touched(oldfd);
	touched(newfd);
	return r;
}

/* withdraw is counted in engine_depth only: it changes nothing a look
 * reports. */
static int t_withdraw(const int *fds, int n, uint8_t *done)
{
	engine_depth++;
	int r = loaded.withdraw(fds, n, done);
	engine_depth--;
	return r;
}

/* spin is counted in engine_depth only, as withdraw. */
static int t_spin(const int *fds, int n, int epfd, int64_t *state, uint8_t *done)
{
	engine_depth++;
	int r = loaded.spin(fds, n, epfd, state, done);
	engine_depth--;
	return r;
}

/* close is counted in engine_depth only: the descriptor is gone after it. */
static int t_close(int fd)
{
	engine_depth++;
	int r = loaded.close(fd);
	engine_depth--;
	return r;
}

/* eng_layer puts w's functions over eng's, where both have one, and keeps
 * eng's in below for the wrappers to call: a layer of wrappers (this
 * file's counting, urgent.c's). */
void eng_layer(struct shim_engine *below, const struct shim_engine *w)
{
	*below = eng;
#define LAYER(f)                 \
	if (eng.f && w->f)       \
		eng.f = w->f
	LAYER(attach);
	LAYER(sendv);
	LAYER(sendv_flags);
	LAYER(recvv);
	LAYER(poll);
	LAYER(shutdown);
	LAYER(close);
	LAYER(stats);
	LAYER(dup);
	LAYER(query);
	LAYER(take_early);
	LAYER(exit);
	LAYER(recv_cancel);
	LAYER(send_cancel);
	LAYER(set_buffers);
	LAYER(short_peer);
	LAYER(withdraw);
	LAYER(spin);
#undef LAYER
}

/* count_touches puts the counting wrappers over the loaded functions. */
static void count_touches(void)
{
	static const struct shim_engine counting = {
		.attach = t_attach,
		.sendv = t_sendv,
		.sendv_flags = t_sendv_flags,
		.recvv = t_recvv,
		.poll = t_poll,
		.shutdown = t_shutdown,
		.dup = t_dup,
		.query = t_query,
		.take_early = t_take_early,
		.recv_cancel = t_recv_cancel,
		.send_cancel = t_send_cancel,
		.set_buffers = t_set_buffers,
		.close = t_close,
		.withdraw = t_withdraw,
		.spin = t_spin,
	};
	eng_layer(&loaded, &counting);
}

/* engine_bind finds the engine's functions; 0 when every required one is there. */
static int engine_bind(void *h)
{
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
	eng.threads = (sdp_threads_fn)dlsym(h, "sdp_threads");
	eng.short_peer = (sdp_short_peer_fn)dlsym(h, "sdp_short_peer");
	eng.withdraw = (sdp_withdraw_fn)dlsym(h, "sdp_withdraw");
	eng.spin = (sdp_spin_fn)dlsym(h, "sdp_spin");
	if (!(eng.init && eng.attach && eng.sendv && eng.recvv && eng.poll && eng.shutdown && eng.close && eng.stats &&
	      eng.dup && eng.query && eng.take_early))
		return -1;
	stackbound_engine((void *)eng.init);
	count_touches();
	return 0;
}

/* engine_init starts the engine with the process's settings. */
static int engine_init(void)
{
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
	snprintf(ec.prog, sizeof ec.prog, "%s", prog_name());
	return eng.init(&ec);
}

/* ms_between is the time from a to b in milliseconds. */
static double ms_between(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* ENGINE_TIMER_SLACK_NS is the timer slack of the threads the Go runtime
 * starts with (its first thread and its monitor, sysmon), which inherit it
 * from the thread that loads the engine. The monitor sleeps 20 us at a time
 * while any thread is in the engine or has just left it, which a program
 * calling the engine for each event does all the time: each of its wake-ups
 * took the CPU from the application (docs/PERFORMANCE.md, "The runtime's
 * monitor"). With 1 ms of slack the kernel may let it sleep up to 1 ms
 * longer; what it watches (a goroutine running 10 ms) does not need it
 * sooner, and the engine's own timers (linger, the background flush, the
 * exit flush) are milliseconds long already. It also takes back the P of a
 * thread that has left the engine for one that calls in and finds none
 * free: the engine keeps a P for each application thread that uses it
 * (count_thread, preload/procs.go), so that no call waits for that. The
 * application's own threads keep their slack. */
#define ENGINE_TIMER_SLACK_NS 1000000UL

/* engine_load_locked loads and starts the engine; engine_mu is held. The
 * debug log says what the load cost the connection that waited for it
 * (a fresh process's first connection). */
static int engine_load_locked(void)
{
	char path[PATH_MAX] = "";
	struct timespec t_begin, t_opened, t_started, t_end;
	clock_gettime(CLOCK_MONOTONIC, &t_begin);
	/* Before the runtime's threads: growing it later waits for RCU. */
	grow_fd_table();
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
	/* The runtime's threads start from this one's timer slack (see
	 * ENGINE_TIMER_SLACK_NS); the application's thread gets its own back. */
	int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	prctl(PR_SET_TIMERSLACK, ENGINE_TIMER_SLACK_NS, 0, 0, 0);
	void *h = engine_open(path, sizeof path);
	clock_gettime(CLOCK_MONOTONIC, &t_opened);
	int rc = 0;
	int bad = !h || engine_bind(h) < 0 || engine_init() != 0;
	if (slack > 0)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
	if (bad) {
		logmsg(0, "cannot load the SDP engine %s: %s; using TCP", path, h ? "bad engine" : dlerror());
		engine_failed = 1;
		rc = -1;
	} else {
		urg_wrap();
		engine_pid = getpid();
	}
	sigaction(SIGURG, &urg_act, NULL);
	pthread_sigmask(SIG_SETMASK, &urg_mask, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t_started);
	if (h)
		protect_new_fds(before);
	clock_gettime(CLOCK_MONOTONIC, &t_end);
	if (rc == 0)
		logmsg(3, "engine loaded in %.2f ms: dlopen %.2f, runtime and engine start %.2f, descriptor bookkeeping %.2f",
		       ms_between(&t_begin, &t_end), ms_between(&t_begin, &t_opened), ms_between(&t_opened, &t_started),
		       ms_between(&t_started, &t_end));
	return rc;
}

int load_engine(void)
{
	pid_t me = getpid(); /* not my_pid(): a child forked around libc must not use its parent's engine */
	if (engine_pid == me)
		return 0;
	if (!engine_usable_by(me))
		return -1;
	pthread_mutex_lock(&engine_mu);
	int rc = 0;
	if (engine_pid != getpid())
		rc = engine_load_locked();
	pthread_mutex_unlock(&engine_mu);
	return rc;
}
