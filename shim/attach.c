/* shim/attach.c: attaching connections to the engine, and connections pending across fork. */
#include "shim.h"

/* ---- attaching connections to the engine -------------------------------- */

/* is_nonblocking asks the kernel once per descriptor: O_NONBLOCK changes
 * through fcntl(F_SETFL) and ioctl(FIONBIO), which keep the answer up to
 * date, except on a socket that another descriptor may share (dup, or
 * inherited), which is asked every time. */
int nonblock_cached(struct fdent *e)
{
	if (!kept_valid(e, atomic_load(&e->nb_forks)))
		return -1;
	return atomic_load(&e->nb);
}

void nonblock_learnt(struct fdent *e, int v)
{
	atomic_store(&e->nb_forks, atomic_load(&n_forks));
	atomic_store(&e->nb, v);
}

int is_nonblocking(int fd)
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
void attach_siblings(int fd)
{
	struct stat a, b;
	if (fstat(fd, &a) < 0)
		return;
	for (int i = 0, end = atomic_load(&fd_end); i < end; i++) {
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
pthread_mutex_t attach_mu = PTHREAD_MUTEX_INITIALIZER;

static int attach_locked(int fd, struct fdent *e);

/* settle_connecting finishes, for a data call, a non-blocking connect to an
 * SDP port that the application did not wait for: bytes written before the
 * kernel's handshake completes go to the engine (which holds them until the
 * MPA exchange is done), never raw onto the SDP port. A call that may block
 * waits for the connect; one that may not gets EAGAIN while it is in
 * progress, as on a TCP socket that is still connecting. Returns 0 (the
 * connection is K_ACTIVE now, or TCP after a refusal) or -1 with errno. */
int settle_connecting(int fd, struct fdent *e, int may_block)
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

void claims_map(void)
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
int attach(int fd, struct fdent *e)
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
			       fd, (int)owner, prog_name());
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
