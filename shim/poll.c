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
int poll_emulated(struct pollfd *fds, nfds_t n, int timeout)
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
