/* shim/exec.c: exec, fork and exit. */
#include "shim.h"

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
	for (int fd = 0, end = atomic_load(&fd_end); fd < end; fd++) {
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
int adopt_record(int fd, int k, int fam, int passive, unsigned port, int hidden, const char *hex)
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

/* collect_args turns execl's variable arguments, up to the NULL that ends
 * them, into an argv array; NULL with errno ENOMEM when out of memory. */
static char **collect_args(const char *first, va_list *ap)
{
	size_t n = 1, cap = 16;
	char **argv = malloc(sizeof(char *) * cap);
	if (!argv)
		goto nomem;
	argv[0] = (char *)first;
	for (char *a; (a = va_arg(*ap, char *)) != NULL;) {
		if (n + 1 >= cap) {
			char **m = realloc(argv, sizeof(char *) * (cap *= 2));
			if (!m)
				goto nomem;
			argv = m;
		}
		argv[n++] = a;
	}
	argv[n] = NULL;
	return argv;
nomem:
	free(argv);
	errno = ENOMEM;
	return NULL;
}

/* exec_list runs execve (or execvpe: search) with an argv from collect_args. */
static int exec_list(const char *file, char **argv, char *const envp[], int search)
{
	if (!argv)
		return -1;
	int r = search ? execvpe(file, argv, envp) : execve(file, argv, envp);
	free(argv);
	return r;
}

EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	char **argv = collect_args(arg, &ap);
	va_end(ap);
	return exec_list(path, argv, environ, 0);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	char **argv = collect_args(arg, &ap);
	va_end(ap);
	return exec_list(file, argv, environ, 1);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	char **argv = collect_args(arg, &ap);
	char *const *envp = argv ? va_arg(ap, char *const *) : NULL;
	va_end(ap);
	return exec_list(path, argv, envp, 0);
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
	wakefd_after_fork();
	atomic_store(&waiters, 0); /* the parent's other threads, waiting, are not here */
	atomic_store(&n_tcp_conns, 0);
	atomic_store(&n_sockets, 0);
	for (int i = 0; i < SDP_REASON_MAX; i++)
		atomic_store(&n_reasons[i], 0);
}

__attribute__((constructor)) static void shim_init(void)
{
	need_real();
	cached_pid = getpid();
	prog_name_init();
	cfg.log_fd = 2;
	read_config();
	adopt_inherited();
	adopt_activated();
	pthread_atfork(count_fork, NULL, child_after_fork);
}

/* ---- _exit ---------------------------------------------------------------
 *
 * _exit and _Exit skip atexit handlers and destructors, where the engine's
 * exit flush runs (shim_fini). Over TCP the kernel still delivers what the
 * process's sockets hold, and ends each connection with a FIN once their
 * last bytes are acknowledged. So _exit runs the same flush: the engine
 * sends what its connections hold, ends each (DisConn), and waits, bounded,
 * until they are settled; then settle_before_exit waits for the closed ones
 * the engine's threads still finish (settling). Without it, a process
 * whose last act is _exit (a forked worker, dash, an event loop) lost the
 * bytes its engine still held, and its socket's unread octets (the peer's
 * doorbells and credit updates) made the kernel end the connection with a
 * reset instead of a FIN.
 *
 * The flush calls into the engine, so only where that is safe: this
 * process's engine (not a fork's parent's, not from a vfork child), and not
 * from a signal handler that interrupted this thread inside the engine or
 * inside one of the shim's locks (engine_depth, urg_hold), which the flush
 * could wait for; those exit as before, with only the settling wait, which
 * calls nothing. */

#define SETTLE_MAX_MS 10000

static _Atomic int n_settling;
static atomic_int exit_flushed;

void shim_settling(int delta)
{
	atomic_fetch_add(&n_settling, delta);
}

static void settle_before_exit(void)
{
	if (engine_pid == 0 || engine_pid != getpid() || shares_parents_memory())
		return; /* no engine here, or the parent's */
	if (eng.exit && engine_depth == 0 && urg_hold == 0 && !atomic_exchange(&exit_flushed, 1))
		eng.exit();
	for (int ms = 0; ms < SETTLE_MAX_MS && atomic_load(&n_settling) > 0; ms++) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

EXPORT void _exit(int status)
{
	drain_unused_at_exit();
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
	drain_unused_at_exit();
	if (engine_pid == getpid() && eng.exit && !atomic_exchange(&exit_flushed, 1))
		eng.exit(); /* a forked child never calls into its parent's engine */
	if (!cfg.stats || (!atomic_load(&n_sockets) && engine_pid != getpid()))
		return; /* this process used no TCP socket */
	/* The engine's line, all counters at 20 digits: under 1,600 octets. */
	char eng_line[1600] = "sdp_conns=0 fpdus_tx=0 fpdus_rx=0 markers_tx=0 markers_rx=0 crc_bytes_rx=0 "
			     "crc_errors=0 payload_tx=0 payload_rx=0";
	if (engine_pid == getpid() && eng.stats)
		eng.stats(eng_line, sizeof eng_line);
	char buf[1800];
	int n = snprintf(buf, sizeof buf, "libsdp: stats pid=%d prog=%s tcp_conns=%llu %s engine=%s\n",
			 (int)getpid(), prog_name(),
			 (unsigned long long)atomic_load(&n_tcp_conns), eng_line,
			 engine_pid == getpid() ? "loaded" : "not-loaded");
	if (n > (int)sizeof buf)
		n = sizeof buf;
	ssize_t w = real.write(cfg.log_fd, buf, n);
	(void)w;
}
