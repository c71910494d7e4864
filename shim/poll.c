/* shim/poll.c: readiness: poll and select. */
#include "shim.h"

/* ---- hooks: readiness ------------------------------------------------------ */

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
/* A round of poll_emulated: what the kernel is asked (k), for which of the
 * application's entries (map), and the engine's own timeout (tmo). */
struct poll_round {
	struct pollfd *k;
	int *map;
	unsigned char *slept; /* the engine counts fds[i]'s connection as slept on */
	int nk, tmo;
	int spin; /* the first round of a wait on one connection: its look may poll first */
};

/* waiters: the process's threads inside an emulated poll, select or epoll
 * wait. Only one that is the process's one may poll shared memory before it
 * sleeps: event loops on several threads outnumber the CPUs with their
 * peers', and a thread that polls takes the CPU another needs to answer. */
_Atomic int waiters;

static void poll_ask(struct poll_round *pr, int fd, short events, nfds_t i)
{
	pr->k[pr->nk] = (struct pollfd){ .fd = fd, .events = events };
	pr->map[pr->nk++] = (int)i;
}

/* poll_sdp asks the engine about an SDP connection: 1 when p->revents is
 * set, 0 when the kernel is to wait on its socket (and eventfd), -1 when
 * the connection fell back to TCP and is polled as such. */
static int poll_sdp(struct pollfd *p, struct fdent *e, nfds_t i, struct poll_round *pr)
{
	pid_t t = my_tid(), last = atomic_exchange(&e->last_tid, t);
	if (last && last != t)
		atomic_store(&e->threads, 1);
	int own = my_wakefd();
	int kw = 0, et = -1, efd = own;
	uint32_t edges;
	int f = p->events | SDP_POLL_SLEEP | (pr->slept[i] ? SDP_POLL_WOKE : 0) | own_flag(own);
	if (pr->spin && !pr->slept[i] && (p->events & (POLLIN | POLLRDNORM)) && atomic_load(&waiters) == 1)
		f |= SDP_POLL_SPIN;
	int r = e->lowat > 1 && (p->events & (POLLIN | POLLRDNORM)) ? lowat_poll(p->fd, e->lowat, f, &kw, &et, &efd, &edges)
						    : eng.poll(p->fd, f, &kw, &et, &efd, &edges);
	pr->slept[i] = 0;
	if (r <= -SDP_FALLBACK) {
		fallback(p->fd, e, reason_of(r));
		return -1;
	}
	if (r < 0) {
		p->revents = POLLERR;
		return 1;
	}
	if (r & (p->events | POLLERR | POLLHUP)) {
		p->revents = r & (p->events | POLLERR | POLLHUP);
		return 1;
	}
	poll_ask(pr, p->fd, (short)(kw ? kw : POLLIN), i);
	if (efd >= 0) {
		poll_ask(pr, efd, POLLIN, i);
		pr->slept[i] = 1;
	}
	if (et >= 0 && (pr->tmo < 0 || et < pr->tmo))
		pr->tmo = et;
	if (own < 0 && atomic_load(&e->threads) && (pr->tmo < 0 || pr->tmo > SHARED_WAIT_MS))
		pr->tmo = SHARED_WAIT_MS;
	return 0;
}

/* poll_prepare looks at fds[i] before the kernel does: 1 when it is ready
 * already (its revents set), 0 when the kernel is asked about it. */
static int poll_prepare(struct pollfd *p, nfds_t i, struct poll_round *pr)
{
	p->revents = 0;
	if (p->fd < 0)
		return 0;
	struct fdent *e = ours(p->fd);
	int kind = e ? atomic_load(&e->kind) : K_NONE;
	if (kind == K_ACTIVE || kind == K_PASSIVE) {
		if (attach(p->fd, e) < 0) {
			p->revents = POLLERR;
			return 1;
		}
		kind = atomic_load(&e->kind);
	}
	if (kind == K_SDP && e->engine_pid != my_pid()) {
		p->revents = POLLERR | POLLHUP;
		return 1;
	}
	if (kind == K_SDP) {
		int r = poll_sdp(p, e, i, pr);
		if (r >= 0)
			return r;
		kind = K_TCP;
	}
	if (kind == K_CONNECTING) {
		poll_ask(pr, p->fd, POLLOUT, i);
		return 0;
	}
	if (kind == K_EPOLL && e->ep && (p->events & POLLIN) && epoll_peek(e->ep)) {
		p->revents = POLLIN; /* an SDP member is ready */
		return 1;
	}
	poll_ask(pr, p->fd, p->events, i);
	if (kind == K_LISTEN && e->hidden >= 0 && (p->events & POLLIN))
		poll_ask(pr, e->hidden, POLLIN, i);
	return 0;
}

/* poll_collect turns the kernel's answer k[j] into the application's entry's revents. */
static void poll_collect(struct pollfd *p, const struct pollfd *k)
{
	struct fdent *e = ours(p->fd);
	int kind = e ? atomic_load(&e->kind) : K_NONE;
	if (kind == K_SDP) {
		if (k->fd != p->fd && (k->revents & POLLIN))
			drain_wakeups(k->fd);
		return; /* asked again on the next round */
	}
	if (kind == K_CONNECTING) {
		if (resolve_connecting(p->fd, e, k->revents)) {
			if (atomic_load(&e->kind) == K_ACTIVE)
				p->revents |= POLLOUT & p->events;
			else if (e->so_error)
				p->revents |= (POLLOUT & p->events) | POLLERR | POLLHUP;
		}
		return;
	}
	if (k->fd != p->fd) /* the hidden SDP listener: POLLHUP is fd's own to give */
		p->revents |= k->revents & POLLIN;
	else
		p->revents |= k->revents;
	if (kind == K_TCP && atomic_load(&e->reconnecting))
		settle_reconnect(p->fd, e, 0);
	if (kind == K_TCP && atomic_load(&e->sk_err))
		p->revents |= POLLERR;
}

/* poll_wait_ms is how long the kernel may wait this round. */
static int poll_wait_ms(int ready, int tmo, int64_t deadline)
{
	if (ready)
		return 0;
	if (deadline >= 0) {
		int left = ms_left(deadline);
		if (tmo < 0 || left < tmo)
			return left;
	}
	return tmo;
}

/* poll_rounds asks the engine and the kernel in turn until an entry is ready,
 * the deadline passes or the kernel fails. */
static int poll_rounds(struct pollfd *fds, nfds_t n, int64_t deadline, struct poll_round *pr)
{
	for (;;) {
		int ready = 0;
		pr->nk = 0;
		pr->tmo = -1;
		for (nfds_t i = 0; i < n; i++)
			ready += poll_prepare(&fds[i], i, pr);
		pr->spin = 0;
		int wait = poll_wait_ms(ready, pr->tmo, deadline);
		/* Nothing for the kernel to look at and no time to wait (every
		 * descriptor was the engine's and one is ready): no system call. */
		int r = pr->nk == 0 && wait == 0 ? 0 : real.poll(pr->k, pr->nk, wait);
		if (r < 0)
			return -1;
		for (int j = 0; j < pr->nk && r > 0; j++)
			if (pr->k[j].revents)
				poll_collect(&fds[pr->map[j]], &pr->k[j]);
		ready = 0;
		for (nfds_t i = 0; i < n; i++)
			if (fds[i].revents)
				ready++;
		if (ready || (deadline >= 0 && now_ns() >= deadline))
			return ready;
	}
}

int poll_emulated(struct pollfd *fds, nfds_t n, int timeout)
{
	struct pollfd kstack[64];
	int mstack[64];
	unsigned char rstack[64] = { 0 };
	struct poll_round pr = { .k = kstack, .map = mstack, .slept = rstack };
	if (n * 2 > 64) {
		pr.k = malloc(sizeof *pr.k * n * 2);
		pr.map = malloc(sizeof *pr.map * n * 2);
		pr.slept = calloc(n, 1);
		if (!pr.k || !pr.map || !pr.slept) {
			free(pr.k);
			free(pr.map);
			free(pr.slept);
			errno = ENOMEM;
			return -1;
		}
	}
	/* A wait on one connection (and kernel descriptors) may poll it first. */
	int conns = 0;
	for (nfds_t i = 0; i < n && conns < 2; i++) {
		struct fdent *e = fds[i].fd >= 0 ? ours(fds[i].fd) : NULL;
		int k = e ? atomic_load(&e->kind) : K_NONE;
		conns += k == K_SDP || k == K_ACTIVE || k == K_PASSIVE;
	}
	pr.spin = timeout != 0 && conns == 1;
	atomic_fetch_add(&waiters, 1);
	int result = poll_rounds(fds, n, deadline_ms(timeout), &pr);
	atomic_fetch_sub(&waiters, 1);
	int saved = errno;
	for (nfds_t i = 0; i < n; i++) {
		if (pr.slept[i]) {
			int kw, et, efd = my_wakefd();
			uint32_t edges;
			eng.poll(fds[i].fd, SDP_POLL_WOKE | own_flag(efd), &kw, &et, &efd, &edges);
		}
	}
	errno = saved;
	if (pr.k != kstack) {
		free(pr.k);
		free(pr.map);
		free(pr.slept);
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
