/* shim/fallback.c: falling back to TCP. */
#include "shim.h"

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

int is_carried(int level, int name)
{
	for (size_t i = 0; i < sizeof carried_opts / sizeof carried_opts[0]; i++)
		if (carried_opts[i][0] == level && carried_opts[i][1] == name)
			return 1;
	return 0;
}

/* carry_opts gives socket to the carried options of socket from, where
 * they differ (a listen() or a fallback: rare enough for 24 calls). */
void carry_opts(int from, int to)
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
void lowat_to_kernel(int fd, struct fdent *e)
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

int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* deadline_ms is when a wait of timeout milliseconds ends (now_ns() time),
 * or -1 for a negative timeout (no end). Kept finer than a millisecond: a
 * deadline in whole milliseconds ends a wait up to one early once the work
 * before its sleep (a look, a poll) crosses one. */
int64_t deadline_ms(int timeout)
{
	return timeout < 0 ? -1 : now_ns() + (int64_t)timeout * 1000000;
}

/* ms_left is what remains until deadline (now_ns() time) in whole
 * milliseconds, rounded up as the kernel rounds a wait's timeout: a wait of
 * that many milliseconds ends at the deadline or after it, never before; 0
 * once it has passed. */
int ms_left(int64_t deadline)
{
	int64_t left = deadline - now_ns();
	if (left <= 0)
		return 0;
	return left / 1000000 >= INT_MAX ? INT_MAX : (int)((left + 999999) / 1000000);
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
void reconnected(struct fdent *e, int r)
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
int fallback(int fd, struct fdent *e, int reason)
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
int reason_of(int rc)
{
	int r = -rc - SDP_FALLBACK;
	int base = r == (SDP_REASON_PEER_CLOSED | SDP_FALLBACK_RESET) ? SDP_REASON_PEER_CLOSED : r;
	return (base > 0 && base < SDP_REASON_MAX) ? r : SDP_REASON_FOREIGN;
}
