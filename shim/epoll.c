/* shim/epoll.c: epoll. */
#include "shim.h"

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

/* EP_RECENT: a registration found active (ready, or its socket seen by the
 * kernel) within the set's last EP_RECENT returns counts as busy (epoll_withdraw);
 * EP_WITHDRAW_MAX: at most so many are withdrawn at one return, each a look
 * at the next wait. */
#define EP_RECENT 16
#define EP_WITHDRAW_MAX 64

int epset_count(struct epset *ep)
{
	return ep->n;
}

static uint64_t ep_tag(int fd, uint32_t gen)
{
	return EP_TAG | ((uint64_t)gen << 16) | (uint16_t)fd;
}

void epset_clear(struct fdent *e)
{
	struct epset *ep = e->ep;
	if (!ep)
		return;
	pthread_mutex_lock(&ep->mu);
	for (int i = 0; i < ep->n; i++) {
		/* Its members' registrations go with it (epsets, look_flags). */
		struct epreg *r = &ep->regs[i];
		struct fdent *m = r->parked ? NULL : ours(r->fd);
		if (m && atomic_load(&m->gen) == r->gen)
			atomic_fetch_sub(&m->epsets, 1);
	}
	ep->n = 0;
	ep->tagged = 0;
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

/* epoll_ctl_listener registers a listener and its hidden SDP listener alike. */
static int epoll_ctl_listener(int epfd, int op, int fd, struct fdent *e, struct epoll_event *ev)
{
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

/* epreg_add registers an SDP connection (or a socket with a pending error):
 * the kernel watches its socket, tagged, and the shim keeps what the
 * application asked for. Returns 0 or an errno; ep->mu is held. */
static int epreg_add(int epfd, struct epset *ep, int fd, struct fdent *e, const struct epoll_event *ev)
{
	if (ep->n == ep->cap) {
		int cap = ep->cap ? ep->cap * 2 : 16;
		struct epreg *nr = realloc(ep->regs, sizeof *nr * cap);
		if (!nr)
			return ENOMEM;
		ep->regs = nr;
		ep->cap = cap;
	}
	uint32_t gen = atomic_load(&e->gen);
	struct epoll_event kev = { .events = EP_KBASE, .data.u64 = ep_tag(fd, gen) };
	if (real.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &kev) < 0)
		return errno;
	ep->tagged = 1;
	atomic_fetch_add(&e->epsets, 1);
	ep->regs[ep->n++] = (struct epreg){ .fd = fd, .gen = gen, .events = ev->events, .data = ev->data, .kfired = 1, .efd = -1,
					    .wfull = atomic_load(&e->wfull), .kmask = EP_KBASE, .due = -1 };
	return 0;
}

/* epreg_ctl applies op to the registration r (NULL: none) of fd; returns 0
 * or an errno; ep->mu is held. */
static int epreg_ctl(int epfd, struct epset *ep, int op, int fd, struct fdent *e, struct epreg *r,
		     const struct epoll_event *ev)
{
	switch (op) {
	case EPOLL_CTL_ADD:
		if (!ev)
			return EFAULT; /* as the kernel: nothing changes */
		if (r && r->parked) {
			/* Back after a DEL: the kernel's part is still there. */
			atomic_fetch_add(&e->epsets, 1);
			/* A socket that fired while it was away took its registration
			 * with it (epoll_mark): one still parked has seen nothing the
			 * kernel has reported, and a quiet look will do (ask). */
			*r = (struct epreg){ .fd = fd, .gen = r->gen, .events = ev->events, .data = ev->data,
					     .kfired = r->kfired, .ask = 1, .efd = r->efd, .wfull = atomic_load(&e->wfull),
					     .kmask = r->kmask, .due = -1, .active = r->active };
			return 0;
		}
		if (r)
			return EEXIST;
		return epreg_add(epfd, ep, fd, e, ev);
	case EPOLL_CTL_MOD:
		if (!r || r->parked)
			return ENOENT;
		if (!ev)
			return EFAULT;
		r->events = ev->events;
		r->data = ev->data;
		r->disabled = 0;
		r->last = 0;
		r->ask = 1; /* quietly: what the kernel saw is marked (kfired) as it comes */
		return 0;
	case EPOLL_CTL_DEL:
		if (!r || r->parked)
			return ENOENT;
		/* Event loops delete and add a connection again as its
		 * interest comes and goes (redis-benchmark: at every request):
		 * the kernel's registrations of its socket and eventfd stay
		 * until it comes back, its descriptor is closed, or one of
		 * them fires while it is away (epoll_mark). */
		r->parked = 1;
		atomic_fetch_sub(&e->epsets, 1);
		return 0;
	default:
		return EINVAL;
	}
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	need_real();
	struct epset *ep = epset_of(epfd);
	struct fdent *e = ours(fd);
	if (!ep || !e)
		return real.epoll_ctl(epfd, op, fd, ev);
	int k = atomic_load(&e->kind);
	if (k == K_LISTEN)
		return epoll_ctl_listener(epfd, op, fd, e, ev);
	pthread_mutex_lock(&ep->mu);
	struct epreg *r = epreg_find(ep, fd);
	if (r && r->gen != atomic_load(&e->gen)) {
		epreg_remove(ep, r); /* a registration of a closed descriptor */
		r = NULL;
	}
	if (!is_sdp_conn(k) && !(k == K_TCP && atomic_load(&e->sk_err)) && !r) {
		pthread_mutex_unlock(&ep->mu);
		return real.epoll_ctl(epfd, op, fd, ev);
	}
	int err = epreg_ctl(epfd, ep, op, fd, e, r, ev);
	pthread_mutex_unlock(&ep->mu);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* tcp_ready: the events of a plain TCP socket with a pending error (POLLERR,
 * as the kernel shows its own), or one reported: it stays in the emulated
 * set, where edge-triggered waiters see no new edge (handed to the kernel's
 * set, it would be reported once more); -1 (for the kernel's set) when it
 * has none. */
int tcp_ready(int fd, struct fdent *e, short want, uint32_t *edges)
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
static int sdp_ready(int fd, struct fdent *e, short want, int look, int *kwait, int *tmo, int *efd, uint32_t *edges)
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
	int f = want | look;
	int r = e->lowat > 1 && (want & (POLLIN | POLLRDNORM)) ? lowat_poll(fd, e->lowat, f, kwait, tmo, efd, edges)
						: eng.poll(fd, f, kwait, tmo, efd, edges);
	if (r <= -SDP_FALLBACK) {
		fallback(fd, e, reason_of(r));
		return tcp_ready(fd, e, want, edges);
	}
	return r < 0 ? POLLERR : r;
}

/* registered_alone: the connection's only registration is one set's (no
 * other set, no other descriptor, no child forked since that may hold one
 * and use it). A connection this process's engine has taken counts as its
 * alone whatever forks came before or after: another process that holds
 * the socket can no longer use it (a child's engine cannot drive it, and one
 * that took it first makes this one's use fail, claim_take), so no wait of
 * theirs needs the doorbells this process's waits would spare. So
 * PostgreSQL's backends, which their postmaster forks for each connection
 * it accepted, and redis-server after BGSAVE forks a child, poll and take
 * back doorbells as a process that never forked. */
static int registered_alone(struct fdent *e)
{
	if (atomic_load(&e->epsets) != 1 || e->dupped || e->shared)
		return 0;
	return e->born_forks == atomic_load(&n_forks) || e->engine_pid == my_pid();
}

/* look_flags: what a set's look at r may tell the engine. SDP_POLL_QUIET:
 * the kernel has reported nothing on the socket (or the eventfd) since the
 * last look, which a call into the engine returning since (touched) or a
 * level-triggered readiness brings about; a read would only find the socket
 * as empty as the last one did, and what did arrive keeps it readable for
 * the wait that follows. SDP_POLL_ALONE: this registration is the
 * connection's only one (no other set, no other descriptor, no child forked
 * since that may hold one), so the engine need not ring the eventfd for what this
 * look finds and reports. SDP_POLL_LEVEL: the registration is
 * level-triggered. */
static int look_flags(const struct epreg *r, struct fdent *e)
{
	int f = r->kfired ? 0 : SDP_POLL_QUIET;
	if (!(r->events & EPOLLET))
		f |= SDP_POLL_LEVEL;
	if (registered_alone(e))
		f |= SDP_POLL_ALONE;
	return f;
}

/* unchanged says whether an SDP connection's registration can only report
 * what it reported at the last look, so that the engine need not be asked:
 * nothing was ready then, or the registration is edge-triggered; the kernel
 * has seen nothing on its socket or its eventfd since (kfired: arrivals,
 * doorbells, the engine's wake-ups for what its goroutines do), no call
 * into the engine about it has returned since (touched: a recv may have
 * read more than it returned), and the engine's own timer for it has not
 * run out. A set of many connections (an event loop's) then asks only about
 * those that moved, not about every one at every wait. */
static int unchanged(struct epreg *r, struct fdent *e, int k, int64_t *now)
{
	if (r->kfired || r->ask || k != K_SDP || e->lowat > 1 || e->engine_pid != my_pid())
		return 0;
	if (r->ready && !(r->events & EPOLLET))
		return 0;
	if (atomic_load_explicit(&e->touched, memory_order_acquire) != r->touched)
		return 0;
	if (r->due >= 0) {
		if (*now < 0)
			*now = now_ms();
		if (*now >= r->due)
			return 0;
	}
	return 1;
}

/* epoll_scan collects the ready SDP registrations into out. */
static int epoll_scan(int epfd, struct epset *ep, struct epoll_event *out, int max, int *tmo)
{
	int n = 0;
	int64_t now = -1;
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
		if (r->disabled || r->parked)
			continue;
		if (unchanged(r, e, atomic_load(&e->kind), &now)) {
			if (r->due >= 0) {
				int left = (int)(r->due - now);
				if (*tmo < 0 || left < *tmo)
					*tmo = left;
			}
			continue;
		}
		int kw, et, efd;
		uint32_t edges;
		uint32_t before = atomic_load_explicit(&e->touched, memory_order_acquire);
		int ready = sdp_ready(r->fd, e, (short)(r->events & 0xffff), look_flags(r, e), &kw, &et, &efd, &edges);
		/* This look's own call counts once; any other call that returned
		 * meanwhile may have been missed by it: look again next time. */
		uint32_t after = atomic_load_explicit(&e->touched, memory_order_acquire);
		r->touched = after == before + 1 ? after : before;
		if (et >= 0) {
			now = now_ms();
			r->due = now + et;
		} else {
			r->due = -1;
		}
		if (efd >= 0 && efd != r->efd) {
			/* Wake this set too when another thread moves the connection. */
			struct epoll_event wev = { .events = EPOLLIN | EPOLLET, .data.u64 = ep_tag(r->fd, r->gen) };
			if (real.epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &wev) == 0 || errno == EEXIST)
				r->efd = efd;
		}
		if (ready < 0) {
			/* Now plain TCP on a fresh socket: the kernel takes over. */
			atomic_fetch_sub(&e->epsets, 1);
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
		r->ready = rep;
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
		if (rep || r->kfired)
			r->active = ep->returns;
		r->kfired = 0;
		r->ask = 0;
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
void epoll_follow(int fd, struct fdent *e)
{
	struct stat a, b;
	if (fstat(fd, &a) < 0)
		return;
	int other = -1;
	for (int i = 0, end = atomic_load(&fd_end); i < end && other < 0; i++) {
		struct fdent *o = i == fd ? NULL : atomic_load_explicit(&fdtab[i], memory_order_acquire);
		if (o && o->dupped && atomic_load(&o->kind) != K_NONE && fstat(i, &b) == 0 &&
		    b.st_ino == a.st_ino && b.st_dev == a.st_dev)
			other = i;
	}
	if (other < 0)
		return;
	uint32_t gen = atomic_load(&e->gen), ngen = atomic_load(&fdtab[other]->gen);
	for (int i = 0, end = atomic_load(&fd_end); i < end; i++) {
		struct fdent *x = atomic_load_explicit(&fdtab[i], memory_order_acquire);
		if (!x || atomic_load(&x->kind) != K_EPOLL || !x->ep)
			continue;
		pthread_mutex_lock(&x->ep->mu);
		struct epreg *r = epreg_find(x->ep, fd);
		if (r && r->gen == gen && !r->parked && !epreg_find(x->ep, other)) {
			r->fd = other;
			r->gen = ngen;
			r->kfired = 1;
		}
		pthread_mutex_unlock(&x->ep->mu);
	}
}

/* epoll_peek says whether epoll_wait on ep would report one of its SDP
 * members now, without consuming anything (an epoll set polled or nested). */
int epoll_peek(struct epset *ep)
{
	int found = 0;
	pthread_mutex_lock(&ep->mu);
	ep->peeked = 1; /* its descriptor is waited on as well: no withdrawals */
	urg_hold++; /* SIGURG after the unlock */
	for (int i = 0; i < ep->n && !found; i++) {
		struct epreg *r = &ep->regs[i];
		struct fdent *e = ours(r->fd);
		if (r->disabled || r->parked || !e || atomic_load(&e->gen) != r->gen || atomic_load(&e->kind) == K_EPOLL)
			continue;
		int kw, et, efd;
		uint32_t edges;
		int ready = sdp_ready(r->fd, e, (short)(r->events & 0xffff), 0, &kw, &et, &efd, &edges);
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

/* epoll_mark notes a kernel event of a registration. One the application
 * deleted (parked) leaves the kernel's set now, so that its socket wakes
 * this set at most once after the DEL. */
static void epoll_mark(int epfd, struct epset *ep, uint64_t tag)
{
	int fd = (int)(tag & 0xffff);
	uint32_t gen = (uint32_t)(tag >> 16);
	pthread_mutex_lock(&ep->mu);
	struct epreg *r = epreg_find(ep, fd);
	if (r && r->gen == gen) {
		if (r->parked) {
			if (r->efd >= 0)
				real.epoll_ctl(epfd, EPOLL_CTL_DEL, r->efd, NULL);
			real.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
			epreg_remove(ep, r);
		} else {
			r->kfired = 1;
		}
	}
	pthread_mutex_unlock(&ep->mu);
}

/* busy_members collects into fds (their places in the set in idx, at most
 * EP_WITHDRAW_MAX) the registrations epoll_withdraw and epoll_spin act on:
 * found active within the set's last EP_RECENT returns (now), not ready,
 * disabled or deleted, SDP connections of this process's engine registered
 * in this set alone; for a poll (spin), only those waiting for input; for a
 * withdrawal, none the kernel saw move since the last look. Called with
 * ep->mu held. */
static int busy_members(struct epset *ep, uint32_t now, int spin, int *fds, int *idx)
{
	int m = 0;
	for (int i = 0; i < ep->n && m < EP_WITHDRAW_MAX; i++) {
		struct epreg *r = &ep->regs[i];
		if (now - r->active > EP_RECENT || r->ready || r->disabled || r->parked)
			continue;
		if (spin ? !(r->events & EPOLLIN) : r->kfired)
			continue;
		struct fdent *e = ours(r->fd);
		if (!e || atomic_load(&e->gen) != r->gen || atomic_load(&e->kind) != K_SDP ||
		    e->engine_pid != my_pid() || !registered_alone(e))
			continue;
		fds[m] = r->fd;
		idx[m++] = i;
	}
	return m;
}

/* epoll_withdraw: the set's wait returns to the application, which looks
 * again before it sleeps. Its looks at the busy connections that found
 * nothing told their peers over shared memory that this side sleeps; each
 * peer would ring the doorbell for its next message, a system call at each
 * end and a kernel wake-up for nothing, while this thread handles what it
 * got (an event loop of 50 connections: a doorbell per message).
 * The engine takes those announcements back, and the next wait looks at
 * each of those connections before it sleeps (ask). Only for a set
 * with no other thread inside epoll_wait (it would sleep with nothing to
 * wake it), never polled or nested in another set (a wait on its
 * descriptor sleeps in the kernel too), and connections registered here
 * alone (no other set, no other descriptor, no child forked since: their
 * waits would miss the doorbell too); the engine keeps the announcement where a thread sleeps on the
 * connection. Connections not found active in the set's last EP_RECENT
 * returns are left asleep, and at most EP_WITHDRAW_MAX are taken back: each
 * costs a look at the next wait, where a doorbell costs a system call at
 * each end. */
static void epoll_withdraw(struct epset *ep, int returning)
{
	if (!eng.withdraw || engine_pid != my_pid())
		return;
	pthread_mutex_lock(&ep->mu);
	if (atomic_load(&ep->waiting) != 1 || ep->peeked) {
		pthread_mutex_unlock(&ep->mu);
		return;
	}
	urg_hold++; /* SIGURG after the unlock */
	uint32_t now = ep->returns += (uint32_t)returning;
	int fds[EP_WITHDRAW_MAX], idx[EP_WITHDRAW_MAX];
	uint8_t done[EP_WITHDRAW_MAX];
	int m = busy_members(ep, now, 0, fds, idx);
	if (m && eng.withdraw(fds, m, done) > 0)
		for (int j = 0; j < m; j++)
			if (done[j])
				ep->regs[idx[j]].ask = 1;
	pthread_mutex_unlock(&ep->mu);
	urg_unhold();
}

/* epoll_spin: the set's wait found nothing and would sleep. Over shared
 * memory a peer's next message often comes sooner than a sleep and a
 * wake-up: the engine takes back the sleep announcements of the set's busy
 * connections (as epoll_withdraw) and polls their rings for a while that
 * adapts to what earlier polls found (SDP_POLL_US at most), so that a quick
 * answer costs neither side a system call. The connections it watched are
 * looked at again before the set sleeps (ask), which announces sleep anew.
 * The same conditions as epoll_withdraw's, and only while this thread is
 * the process's one in a poll, select or epoll wait (waiters): event loops on several threads
 * (memcached's workers, haproxy's) outnumber the CPUs with their peers',
 * and a thread that polls takes the CPU another needs to answer (memcached
 * under memcaslap, 2 CPUs: 12% fewer operations a second with polls in its
 * four loops). Returns whether the engine watched any (none over iWARP):
 * the set must then look before it sleeps, whatever came. */
static int epoll_spin(int epfd, struct epset *ep)
{
	if (!eng.spin || engine_pid != my_pid() || atomic_load(&waiters) != 1)
		return 0;
	pthread_mutex_lock(&ep->mu);
	if (atomic_load(&ep->waiting) != 1 || ep->peeked) {
		pthread_mutex_unlock(&ep->mu);
		return 0;
	}
	int fds[EP_WITHDRAW_MAX], idx[EP_WITHDRAW_MAX];
	uint8_t done[EP_WITHDRAW_MAX];
	int m = busy_members(ep, ep->returns, 1, fds, idx);
	pthread_mutex_unlock(&ep->mu);
	if (!m)
		return 0;
	memset(done, 0, sizeof done);
	urg_hold++; /* SIGURG after the poll */
	eng.spin(fds, m, epfd, ep->spin, done);
	int watched = 0;
	pthread_mutex_lock(&ep->mu);
	for (int j = 0; j < m; j++) {
		/* The set may have changed meanwhile (another thread's CTL). */
		struct epreg *r = idx[j] < ep->n ? &ep->regs[idx[j]] : NULL;
		if (done[j] && r && r->fd == fds[j])
			r->ask = 1;
		watched |= done[j];
	}
	pthread_mutex_unlock(&ep->mu);
	urg_unhold();
	return watched;
}

static int epoll_emulated(int epfd, struct epset *ep, struct epoll_event *events, int max, int timeout,
			  const sigset_t *mask)
{
	if (max <= 0) {
		errno = EINVAL;
		return -1;
	}
	int64_t deadline = deadline_ms(timeout);
	struct epoll_event kstack[64], *kev = kstack;
	if (max > 64 && !(kev = malloc(sizeof *kev * max))) {
		errno = ENOMEM;
		return -1;
	}
	int result, spun = 0;
	atomic_fetch_add(&ep->waiting, 1);
	atomic_fetch_add(&waiters, 1);
	for (;;) {
		int tmo = -1;
		int n = epoll_scan(epfd, ep, events, max, &tmo);
		if (!n && tmo != 0 && timeout != 0 && !spun) {
			spun = 1;
			if (epoll_spin(epfd, ep))
				continue; /* look at what came, or announce sleep anew */
		}
		int wait = n ? 0 : tmo;
		if (!n && deadline >= 0) {
			int left = ms_left(deadline);
			if (wait < 0 || left < wait)
				wait = left;
		}
		int kn = mask ? real.epoll_pwait(epfd, kev, max - n > 0 ? max - n : 1, wait, mask)
			      : real.epoll_wait(epfd, kev, max - n > 0 ? max - n : 1, wait);
		if (kn < 0) {
			result = n ? n : -1;
			break;
		}
		if (kn > 0 && wait != 0)
			epoll_withdraw(ep, 0); /* woken: this thread looks before it sleeps again */
		int marked = 0;
		for (int j = 0; j < kn; j++) {
			if ((kev[j].data.u64 & EP_TAG_MASK) == EP_TAG) {
				epoll_mark(epfd, ep, kev[j].data.u64);
				marked = 1;
			} else if (n < max) {
				events[n++] = kev[j];
			}
		}
		if (n) {
			result = n;
			break;
		}
		if (!marked && deadline >= 0 && now_ns() >= deadline) {
			result = 0;
			break;
		}
	}
	if (result > 0)
		epoll_withdraw(ep, 1);
	atomic_fetch_sub(&waiters, 1);
	atomic_fetch_sub(&ep->waiting, 1);
	if (kev != kstack)
		free(kev);
	return result;
}

/* epoll_plain waits in the kernel for a set that holds no SDP registration
 * now but held one (ep->tagged; a set that never did is the kernel's
 * alone). One it held may still fire there: a connection the application
 * closed while registered keeps its socket (and its eventfd) open in the
 * engine until the peer has everything, and the kernel keeps a registration
 * until its file is released. Their tagged words are the shim's, never the
 * application's: dropped, and the wait goes on for the time left. */
static int epoll_plain(int epfd, struct epoll_event *events, int max, int timeout, const sigset_t *mask,
		       int masked)
{
	int64_t deadline = timeout > 0 ? deadline_ms(timeout) : -1;
	for (;;) {
		int n = masked ? real.epoll_pwait(epfd, events, max, timeout, mask)
			       : real.epoll_wait(epfd, events, max, timeout);
		if (n <= 0)
			return n;
		int k = 0;
		for (int j = 0; j < n; j++)
			if ((events[j].data.u64 & EP_TAG_MASK) != EP_TAG)
				events[k++] = events[j];
		if (k || timeout == 0)
			return k;
		if (deadline >= 0 && (timeout = ms_left(deadline)) <= 0)
			return 0;
	}
}

EXPORT int epoll_wait(int epfd, struct epoll_event *events, int max, int timeout)
{
	need_real();
	struct epset *ep = epset_of(epfd);
	if (!ep || !ep->tagged)
		return real.epoll_wait(epfd, events, max, timeout);
	if (!ep->n)
		return epoll_plain(epfd, events, max, timeout, NULL, 0);
	return epoll_emulated(epfd, ep, events, max, timeout, NULL);
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int max, int timeout, const sigset_t *mask)
{
	need_real();
	struct epset *ep = epset_of(epfd);
	if (!ep || !ep->tagged)
		return real.epoll_pwait(epfd, events, max, timeout, mask);
	if (!ep->n)
		return epoll_plain(epfd, events, max, timeout, mask, 1);
	return epoll_emulated(epfd, ep, events, max, timeout, mask);
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int max, const struct timespec *ts,
			const sigset_t *mask)
{
	need_real();
	int tmo = ts ? (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000) : -1;
	struct epset *ep = epset_of(epfd);
	if (!ep || !ep->tagged) {
		static int (*pw2)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
		if (!pw2)
			pw2 = dlsym(RTLD_NEXT, "epoll_pwait2");
		if (pw2)
			return pw2(epfd, events, max, ts, mask);
		return real.epoll_pwait(epfd, events, max, tmo, mask);
	}
	if (!ep->n)
		return epoll_plain(epfd, events, max, tmo, mask, 1);
	return epoll_emulated(epfd, ep, events, max, tmo, mask);
}
