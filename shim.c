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
#include "shim/shim.h"

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
void adopt_listener(int fd, const char *how)
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
void adopt_activated(void)
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

/* plain_accepted registers c, accepted on P itself: a plain client's, or one a
 * preloaded client made over TCP. */
static void plain_accepted(int c, struct fdent *l)
{
	struct fdent *e = entry_new(c, K_CAND, l->family);
	if (e) {
		e->passive = 1;
		mark_tcp(c, e, SDP_REASON_PLAIN_PEER);
	}
}

/* A listener whose clients come to P itself (plain programs, and preloaded
 * ones whose connections there carry little: short-connections) would pay
 * every accept a failed accept4 on the empty hidden listener, which is asked
 * first. After PLAIN_FIRST connections in a row to P, a non-blocking accept
 * asks P first, and the hidden listener first again at every PLAIN_FIRST-th
 * call, so that an SDP client waits behind at most that many plain ones. */
#define PLAIN_FIRST 8

int do_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags)
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
	unsigned run = atomic_load_explicit(&l->plain_run, memory_order_relaxed);
	int nb = -1, plain_tried = 0;
	if (run >= PLAIN_FIRST && run % PLAIN_FIRST != 0 && !l->sdp_only &&
	    (nb = is_nonblocking(fd)) == 1) {
		int c = real.accept4(fd, addr, len, flags);
		if (c >= 0) {
			atomic_fetch_add_explicit(&l->plain_run, 1, memory_order_relaxed);
			plain_accepted(c, l);
			return c;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1; /* ECONNABORTED too: the application asks again, as over TCP */
		plain_tried = 1;
	}
	for (;;) {
		int c = real.accept4(l->hidden, addr, len, flags);
		if (c >= 0) {
			atomic_store_explicit(&l->plain_run, 0, memory_order_relaxed);
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
		if (plain_tried) {
			/* P was empty a moment ago: its EAGAIN stands. */
			errno = EAGAIN;
			return -1;
		}
		if (nb < 0)
			nb = is_nonblocking(fd);
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
			atomic_fetch_add_explicit(&l->plain_run, 1, memory_order_relaxed);
			plain_accepted(c, l);
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
	for (int fd = 0, end = atomic_load(&fd_end); fd < end && n < c; fd++) {
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

/* connect_repeated answers a connect() on a connection under way or made. */
static int connect_repeated(int fd, struct fdent *e, int k, const struct sockaddr *addr, socklen_t len)
{
	if (k == K_CONNECTING) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (real.poll(&p, 1, 0) > 0 && resolve_connecting(fd, e, p.revents))
			return connect(fd, addr, len);
		errno = EALREADY;
		return -1;
	}
	/* The kernel's answer: 0 to the first connect() after a non-blocking
	 * one completed, EISCONN after that. Not AF_UNSPEC, which would
	 * disconnect the transport under the engine. */
	if (addr && len >= sizeof(sa_family_t) && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6))
		return real.connect(fd, addr, len);
	errno = EISCONN;
	return -1;
}

/* connect_policy says whether a candidate's connect tries SDP: SDP_REASON_NONE,
 * the reason it goes to TCP, or -1 when a rule wants SDP only and SDP is not
 * to be had (the connect is refused). */
static int connect_policy(int fd, struct fdent *e, const struct sockaddr *addr)
{
	if (!engine_usable())
		return engine_failed ? SDP_REASON_ENGINE : SDP_REASON_AFTER_FORK;
	int mode = rule_mode(ROLE_CLIENT, addr);
	if (mode == MODE_TCP)
		return SDP_REASON_RULE;
	e->sdp_only = mode == MODE_SDP;
	if (mode == MODE_BOTH && neg_lookup(addr))
		return SDP_REASON_CACHED;
	if (mode == MODE_BOTH && cfg.short_tcp && short_peer(addr, e->app_port))
		return SDP_REASON_SHORT;
	if (mode == MODE_BOTH && over_conn_cap())
		return SDP_REASON_LIMIT;
	int why = trusted(fd, e, addr, e->app_port);
	if (why != SDP_REASON_NONE && e->sdp_only) {
		atomic_store(&e->kind, K_TCP);
		e->reason = why;
		return -1;
	}
	return why;
}

/* connect_sdp connects a candidate to the SDP port of its destination. */
static int connect_sdp(int fd, struct fdent *e, const struct sockaddr *addr, socklen_t len)
{
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

EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	need_real();
	struct fdent *e = ours(fd);
	if (!e)
		return real.connect(fd, addr, len);
	int k = atomic_load(&e->kind);
	if (k == K_CONNECTING || k == K_ACTIVE || k == K_SDP || k == K_PASSIVE)
		return connect_repeated(fd, e, k, addr, len);
	if (k != K_CAND || !addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    len > sizeof e->dst)
		return real.connect(fd, addr, len);
	memcpy(&e->dst, addr, len);
	e->dstlen = len;
	e->app_port = sa_port(addr);
	int why = connect_policy(fd, e, addr);
	if (why < 0) {
		errno = ECONNREFUSED;
		return -1;
	}
	if (why != SDP_REASON_NONE) {
		mark_tcp(fd, e, why);
		return real.connect(fd, addr, len);
	}
	return connect_sdp(fd, e, addr, len);
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
