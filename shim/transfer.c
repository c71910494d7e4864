/* shim/transfer.c: waiting, and data transfer on SDP sockets. */
#include "shim.h"
#include <sys/eventfd.h>

/* ---- waiting -------------------------------------------------------------- */

/* A thread waits on SDP connections with an eventfd of its own
 * (SDP_POLL_OWN), which the engine rings while the thread says it sleeps:
 * a thread that wakes empties only its own. With one eventfd per
 * connection, a thread that woke and emptied it could take the wake-up of
 * another that had not looked yet, which then slept on. Made on the
 * thread's first wait, handed to a later thread when it ends (wakefd_free),
 * never kept by a fork's child (wakefd_after_fork). */
static __thread int thread_wakefd = -1;
static pthread_key_t wakefd_key;
static pthread_once_t wakefd_once = PTHREAD_ONCE_INIT;
/* The eventfds of threads that ended, for the next thread: never closed,
 * since the engine may still ring one that a thread left registered (a
 * thread cancelled in its wait), and a closed number can be reused. */
static pthread_mutex_t wakefd_mu = PTHREAD_MUTEX_INITIALIZER;
static int *wakefd_free;
static int wakefd_nfree, wakefd_cap;

static void wakefd_release(void *p)
{
	int fd = (int)(intptr_t)p - 1;
	if (fd < 0)
		return;
	pthread_mutex_lock(&wakefd_mu);
	if (wakefd_nfree == wakefd_cap) {
		int cap = wakefd_cap ? 2 * wakefd_cap : 16;
		int *n = realloc(wakefd_free, sizeof *n * cap);
		if (n) {
			wakefd_free = n;
			wakefd_cap = cap;
		}
	}
	if (wakefd_nfree < wakefd_cap)
		wakefd_free[wakefd_nfree++] = fd;
	pthread_mutex_unlock(&wakefd_mu);
}

static void wakefd_key_init(void)
{
	pthread_key_create(&wakefd_key, wakefd_release);
}

static int wakefd_new(void)
{
	int fd = -1;
	pthread_mutex_lock(&wakefd_mu);
	if (wakefd_nfree > 0)
		fd = wakefd_free[--wakefd_nfree];
	pthread_mutex_unlock(&wakefd_mu);
	if (fd >= 0)
		return fd;
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -1;
	fd = move_high(fd); /* out of the application's way */
	shim_own_fd(fd, 1);
	return fd;
}

/* my_wakefd returns the calling thread's eventfd, or -1 when it cannot be
 * had (the connection's own is used then); own_flag is SDP_POLL_OWN for
 * an eventfd that is one. */
int my_wakefd(void)
{
	if (thread_wakefd >= 0)
		return thread_wakefd;
	pthread_once(&wakefd_once, wakefd_key_init);
	int fd = wakefd_new();
	if (fd < 0)
		return -1;
	thread_wakefd = fd;
	pthread_setspecific(wakefd_key, (void *)(intptr_t)(fd + 1));
	return fd;
}

static void wakefd_close(int fd)
{
	shim_own_fd(fd, 0);
	real.close(fd);
}

/* wakefd_after_fork: the child's copies are the parent's eventfds too
 * (they would take each other's wake-ups); the child makes its own. */
void wakefd_after_fork(void)
{
	if (thread_wakefd >= 0) {
		wakefd_close(thread_wakefd);
		thread_wakefd = -1;
		pthread_setspecific(wakefd_key, NULL);
	}
	pthread_mutex_init(&wakefd_mu, NULL);
	for (int i = 0; i < wakefd_nfree; i++)
		wakefd_close(wakefd_free[i]);
	wakefd_nfree = 0;
}

/* drain_wakeups empties this thread's eventfd (or a connection's) after it woke this thread. */
void drain_wakeups(int efd)
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
int restartable(void)
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

pid_t my_tid(void)
{
	static __thread pid_t tid;
	if (!tid)
		tid = (pid_t)syscall(SYS_gettid);
	return tid;
}

/* sock_timeout is the socket's SO_RCVTIMEO (want POLLIN) or SO_SNDTIMEO
 * (POLLOUT) in ns, 0 for none. The kernel is asked once and the answer kept
 * in the entry while it holds (kept_valid: only this descriptor of this
 * process can change it;
 * setsockopt through the hooks forgets it): a blocking ping-pong asked it
 * once per message, a system call TCP's recv does not make. */
static int64_t sock_timeout(int fd, int want)
{
	struct fdent *e = ours(fd);
	int i = want == POLLIN ? 0 : 1;
	int64_t ns = e && kept_valid(e, atomic_load(&e->tmo_forks)) ? atomic_load(&e->tmo_ns[i]) : -1;
	if (ns >= 0)
		return ns;
	unsigned gen = e ? atomic_load(&e->tmo_gen) : 0;
	struct timeval tv = { 0, 0 };
	socklen_t l = sizeof tv;
	if (real.getsockopt(fd, SOL_SOCKET, i == 0 ? SO_RCVTIMEO : SO_SNDTIMEO, &tv, &l) < 0)
		return 0;
	ns = (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
	if (e) {
		atomic_store(&e->tmo_forks, atomic_load(&n_forks));
		atomic_store(&e->tmo_ns[i], ns);
		if (atomic_load(&e->tmo_gen) != gen) /* set meanwhile: what was read may be the old one */
			atomic_store(&e->tmo_ns[i], -1);
	}
	return ns;
}

/* timeouts_changed forgets fd's kept SO_RCVTIMEO and SO_SNDTIMEO. */
void timeouts_changed(struct fdent *e)
{
	atomic_fetch_add(&e->tmo_gen, 1);
	atomic_store(&e->tmo_ns[0], -1);
	atomic_store(&e->tmo_ns[1], -1);
}

/* call_deadline is when a blocking call on fd gives up with EAGAIN: now plus
 * the socket's SO_RCVTIMEO (want POLLIN) or SO_SNDTIMEO (POLLOUT), as the
 * kernel times a blocking TCP call; -1 when none is set. Asked once per
 * call, and only when the call has to wait. */
static int64_t call_deadline(int fd, int want)
{
	int64_t tmo = sock_timeout(fd, want);
	if (tmo <= 0)
		return -1;
	return now_ns() + tmo;
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
 * (SO_RCVLOWAT). The engine calls one byte readable, so POLLIN (and its
 * other name, POLLRDNORM) is asked as
 * POLLRDHUP (end of stream): then the engine counts a sleeper and names
 * what to wait for while the mark is not met. POLLIN is reported when
 * lowat_met, at end of stream or on an error; until then *kw has POLLIN,
 * so the caller waits for more bytes on the kernel socket too. */
int lowat_poll(int fd, int need, int want, int *kw, int *tmo, int *efd, uint32_t *edges)
{
	int r = eng.poll(fd, (want & ~(POLLIN | POLLRDNORM)) | POLLRDHUP, kw, tmo, efd, edges);
	if (r < 0)
		return r;
	if ((r & (POLLRDHUP | POLLERR | POLLHUP)) || lowat_met(fd, need))
		r |= POLLIN | (want & POLLRDNORM);
	else
		*kw |= POLLIN;
	if (!(want & POLLRDHUP))
		r &= ~POLLRDHUP;
	if (*efd >= 0 && (want & SDP_POLL_SLEEP) && (r & want & 0xffff)) {
		/* Ready after all: the caller does not sleep. */
		int k2, t2, f2 = *efd;
		uint32_t g2;
		eng.poll(fd, SDP_POLL_WOKE | (want & SDP_POLL_OWN), &k2, &t2, &f2, &g2);
		*efd = -1;
	}
	return r;
}

/* wait_ready blocks until the engine says want is ready on fd (or an error
 * or hang-up is); for POLLIN, need bytes (SO_RCVLOWAT; 1 for any). Returns
 * 0, -EINTR, -EAGAIN when the call's SO_RCVTIMEO or SO_SNDTIMEO has passed
 * (*deadline: 0 until the call first waits, then call_deadline's), or the
 * engine's negative result. A receive that reads right after it passes
 * woke_recv: back from the kernel's wait as a counted sleeper, wait_ready
 * returns 0 at once with *woke_recv set to the flags (SDP_RECV_WOKE_OWN)
 * with which the receive ends the sleep, instead of asking the engine again. */
static int wait_ready(int fd, int want, int need, int64_t *deadline, int *woke_recv, int first)
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
	int own = my_wakefd(), of = own_flag(own);
	for (;;) {
		int kw = 0, tmo = -1, efd = own;
		uint32_t edges;
		/* A receive's wait (POLLIN alone) reads right after it. */
		int f = want | SDP_POLL_SLEEP | SDP_POLL_BLOCK | woke | of | (want == POLLIN ? SDP_POLL_RECV : 0) | first;
		first = 0;
		int r = need > 1 ? lowat_poll(fd, need, f, &kw, &tmo, &efd, &edges) : eng.poll(fd, f, &kw, &tmo, &efd, &edges);
		if (r < 0)
			return r;
		if (r & (want | POLLERR | POLLHUP))
			return 0;
		woke = efd >= 0 ? SDP_POLL_WOKE : 0;
		if (kw == 0)
			kw = POLLIN;
		if (own < 0 && e && atomic_load(&e->threads) && (tmo < 0 || tmo > SHARED_WAIT_MS))
			tmo = SHARED_WAIT_MS;
		if (*deadline > 0) {
			int left = ms_left(*deadline);
			if (left == 0) {
				if (woke)
					eng.poll(fd, SDP_POLL_WOKE | of, &kw, &tmo, &efd, &edges);
				return -EAGAIN;
			}
			if (tmo < 0 || tmo > left)
				tmo = left;
		}
		struct pollfd p[2] = { { .fd = fd, .events = (short)kw }, { .fd = efd, .events = POLLIN } };
		unsigned urg = atomic_load(&urg_sent);
		if (real.poll(p, efd >= 0 ? 2 : 1, tmo) < 0 && errno == EINTR && !restartable() && !urg_restart(urg)) {
			if (woke)
				eng.poll(fd, SDP_POLL_WOKE | of, &kw, &tmo, &efd, &edges);
			return -EINTR;
		}
		if (woke && (p[1].revents & POLLIN))
			drain_wakeups(efd);
		if (woke && woke_recv && own < SDP_RECV_OWN_MAX) {
			*woke_recv = SDP_RECV_WOKE_OWN(own);
			return 0;
		}
	}
}

/* ---- data transfer on SDP sockets --------------------------------------- */

size_t iov_total(const struct iovec *iov, int cnt)
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
int settle_reconnect(int fd, struct fdent *e, int may_block)
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
size_t zcopy_min(void)
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
int reset_once(struct fdent *e, int err, int send)
{
	if (err != ECONNRESET || !atomic_exchange(&e->reset_told, 1))
		return err;
	return send ? EPIPE : 0;
}

/* done_or_error ends a data call that stops early: what it moved, or -1 with err when nothing. */
static ssize_t done_or_error(size_t done, int err)
{
	if (done)
		return (ssize_t)done;
	errno = err;
	return -1;
}

/* nonblocking_call says whether the call may not wait (MSG_DONTWAIT, or
 * O_NONBLOCK, which costs a system call and is asked once per call). */
static int nonblocking_call(int fd, int flags, int *nonblock)
{
	if (*nonblock < 0)
		*nonblock = (flags & MSG_DONTWAIT) || is_nonblocking(fd);
	return *nonblock;
}

/* io_prepare readies fd for a data call: 1 when the call goes over TCP,
 * 0 when the engine has the connection, -1 on error (errno set). */
static int io_prepare(int fd, struct fdent *e, int flags)
{
	if (atomic_load(&e->kind) == K_TCP) /* here for via_shim's reasons */
		return 1;
	if (atomic_load(&e->kind) == K_CONNECTING &&
	    settle_connecting(fd, e, !(flags & MSG_DONTWAIT) && !is_nonblocking(fd)) < 0)
		return -1;
	if (attach(fd, e) < 0)
		return -1;
	return atomic_load(&e->kind) == K_TCP;
}

/* zc_wait waits until a blocking call can go on (events: POLLIN or POLLOUT):
 * 0, or the wait's error (< 0). When the wait fails and the call had offered
 * its buffers to the peer for zero copy (offered), the engine takes them back
 * first (cancel), and what had arrived in them (Write ZCopy), or what the peer
 * had not read yet and the engine now keeps its own copy of (Read ZCopy), is
 * returned (> 0): the call ends with it. */
static int64_t zc_wait(int fd, int events, const struct iovec *local, int lc, int offered,
		       int64_t (*cancel)(int, const struct iovec *, int), int64_t *deadline, int *woke_recv, int first)
{
	int w = wait_ready(fd, events, 1, deadline, woke_recv, first);
	if (w < 0 && w > -SDP_FALLBACK && offered && cancel) {
		int64_t got = cancel(fd, local, lc);
		if (got > 0)
			return got;
	}
	return w > 0 ? 0 : w;
}

/* send_once hands the engine what is left of a send; *ef: the flags it was given. */
static int64_t send_once(int fd, struct fdent *e, const struct iovec *local, int lc, int flags, int *nonblock, int *ef)
{
	if (!eng.sendv_flags)
		return eng.sendv(fd, local, lc);
	*ef = (flags & MSG_MORE) || e->cork > 0 ? SDP_SEND_MORE : 0;
	if (flags & MSG_OOB) /* the last byte is urgent; a partial send leaves it for the next call */
		*ef = SDP_SEND_OOB;
	else if (call_waits(fd, local[0].iov_len, flags, nonblock))
		*ef |= SDP_SEND_WAIT;
	return eng.sendv_flags(fd, local, lc, *ef);
}

ssize_t sdp_sendv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags)
{
	int tcp = io_prepare(fd, e, flags);
	if (tcp)
		return tcp < 0 ? -1 : tcp_sendv(fd, e, iov, cnt, flags);
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
		int ef = 0;
		int64_t n = send_once(fd, e, local, lc, flags, &nonblock, &ef);
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
			if (nonblocking_call(fd, flags, &nonblock)) {
				/* The application saw the transport full: the room that
				 * comes back is a new edge for EPOLLET waiters. */
				atomic_fetch_add(&e->wfull, 1);
				return done_or_error(done, EAGAIN);
			}
			int64_t w = zc_wait(fd, POLLOUT, local, lc, ef & SDP_SEND_WAIT, eng.send_cancel, &deadline, NULL, 0);
			if (w > 0)
				return done + (size_t)w;
			if (w == -EINTR || w == -EAGAIN) {
				return done_or_error(done, -w);
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
	int w = wait_ready(fd, POLLIN, need, deadline, NULL, 0);
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

/* sdp_recv_oob takes the urgent byte: never waits, as on TCP. */
static ssize_t sdp_recv_oob(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags)
{
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

/* recv_wait_failed ends a receive that got nothing with the wait's error w. */
static ssize_t recv_wait_failed(int fd, struct fdent *e, int w, const struct iovec *iov, int cnt, int flags)
{
	if (w == -EINTR || w == -EAGAIN) {
		errno = -w;
		return -1;
	}
	if (w > -SDP_FALLBACK) {
		errno = reset_once(e, -w, 0);
		return errno ? -1 : 0;
	}
	return after_fallback_recv(fd, e, w, iov, cnt, flags); /* the engine let go of fd while waiting */
}

ssize_t sdp_recvv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags)
{
	int tcp = io_prepare(fd, e, flags);
	if (tcp)
		return tcp < 0 ? -1 : tcp_recvv(fd, e, iov, cnt, flags);
	if (flags & MSG_TRUNC)
		return sdp_recv_trunc(fd, e, iov, cnt, flags);
	if (flags & MSG_OOB)
		return sdp_recv_oob(fd, e, iov, cnt, flags);
	size_t total = iov_total(iov, cnt), done = 0;
	int waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
	int eflags = (flags & MSG_PEEK) ? SDP_RECV_PEEK : 0;
	struct iovec local[IOV_LOCAL];
	int nonblock = -1, fill = 0;
	int woke = 0; /* SDP_RECV_WOKE_OWN: the wait's sleep, which the next call ends */
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
		/* Known to block (no system call to ask): see SDP_RECV_BLOCK. A
		 * receive that will wait for one byte polls the ring in the
		 * same call (SDP_RECV_SPIN); with SO_RCVLOWAT, or a zero-copy
		 * offer to wait for, its wait's look polls, as before. */
		if (!fill && !(flags & (MSG_DONTWAIT | MSG_PEEK)) && (nonblock == 0 || (nonblock < 0 && nonblock_cached(e) == 0)))
			ef |= SDP_RECV_BLOCK | (need > 1 || (ef & SDP_RECV_WAIT) ? 0 : SDP_RECV_SPIN);
		if (woke) { /* back from a wait: this call ends its sleep, and reads */
			ef = (ef & ~(SDP_RECV_BLOCK | SDP_RECV_SPIN)) | woke;
			woke = 0;
		}
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
			if (nonblocking_call(fd, flags, &nonblock)) {
				return done_or_error(done, EAGAIN);
			}
			int64_t w = zc_wait(fd, POLLIN, local, lc, ef & SDP_RECV_WAIT, eng.recv_cancel, &deadline, &woke,
					    (ef & SDP_RECV_SPIN) ? SDP_POLL_SPUN : 0);
			if (w > 0)
				return done + (size_t)w;
			if (w >= 0)
				continue;
			if (done)
				return done;
			return recv_wait_failed(fd, e, w, iov, cnt, flags);
		}
		if (done)
			return done;
		errno = reset_once(e, (int)-n, 0);
		return errno ? -1 : 0;
	}
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
void listener_tcp_only(int fd, struct fdent *e, const char *why)
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
int peer_is_owner(int fd, struct fdent *e)
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
int resolve_connecting(int fd, struct fdent *e, short revents)
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

/* floor_for is where the shim's and the engine's own descriptors go under
 * a descriptor limit of lim: half of it, away from the application's. */
static int floor_for(rlim_t lim)
{
	return lim > 256 && lim / 2 < INT_MAX ? (int)(lim / 2) : 100;
}

/* high_floor is the floor under the limit now. */
static int high_floor(void)
{
	struct rlimit rl;
	return getrlimit(RLIMIT_NOFILE, &rl) == 0 ? floor_for(rl.rlim_cur) : 100;
}

/* move_high moves a descriptor of the shim's own (a hidden listener) to a
 * high number, away from the application's. */
int move_high(int fd)
{
	int hi = real.fcntl(fd, F_DUPFD_CLOEXEC, high_floor());
	if (hi < 0)
		return fd;
	real.close(fd);
	return hi;
}

/* grow_fd_table makes the process's descriptor table reach the high
 * descriptors, as the first move_high does. The kernel grows the table
 * once, and in a process of several threads waits for an RCU grace period
 * to do it (expand_fdtable: 10-16 ms seen here): the engine's first high
 * descriptor, made after its runtime had started threads, cost a fresh
 * client connecting to another host that much (one connecting on this host
 * had already grown it for its sock_diag socket, unless the runtime's
 * raised limit put the engine's descriptors higher still). */
void grow_fd_table(void)
{
	/* The floor as it will be once the engine has started: Go's runtime
	 * raises the soft descriptor limit to the hard one (package os). */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	int floor = floor_for(rl.rlim_max);
	int fd = open("/", O_PATH | O_CLOEXEC);
	if (fd < 0)
		return;
	int hi = real.fcntl(fd, F_DUPFD_CLOEXEC, floor);
	if (hi >= 0)
		real.close(hi);
	real.close(fd);
}

/* shim_hidden marks a hidden listener: an application that closes every
 * descriptor it does not know must not close it. */
void shim_hidden(int fd)
{
	keep_open(fd);
}
