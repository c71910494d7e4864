/* shim/fdtable.c: the descriptor table, its counters and the socket table sdpstat reads. */
#include "shim.h"

/* ---- the descriptor table --------------------------------------------- */

struct epset;

_Atomic unsigned n_forks; /* a socket open before a fork is shared with the child */

/* Counters for the statistics line. */
_Atomic uint64_t n_tcp_conns, n_reasons[SDP_REASON_MAX], n_sockets;

struct fdent *_Atomic fdtab[FD_MAX];
_Atomic int fd_end;
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;

/* Entries are never freed, only reset, so a racing reader never sees freed
 * memory. */
struct fdent *entry_new(int fd, int kind, int family)
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
			if (e && fd >= atomic_load(&fd_end))
				atomic_store(&fd_end, fd + 1); /* after the entry: a scan that sees the end sees it */
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
	atomic_store(&e->epsets, 0); /* an old descriptor's registrations are stale (gen) */
	e->born_forks = atomic_load(&n_forks);
	e->at_eof = 0;
	atomic_store(&e->tmo_ns[0], -1);
	atomic_store(&e->tmo_ns[1], -1);
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
void keep_open(int fd)
{
	entry_new(fd, K_HIDDEN, 0);
}

void entry_reset(int fd)
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

const char *reason_name(int r)
{
	static const char *names[] = {
		"none", "timeout", "foreign", "version", "refused", "rule",
		"plain-peer", "after-fork", "engine-unavailable", "cached", "sdp-port-busy",
		"resource-limit", "untrusted-sdp-port", "untrusted-remote", "closed-before-handshake",
		"short-connections",
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
void mark_tcp(int fd, struct fdent *e, int reason)
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

const char *kind_name(int k)
{
	static const char *names[] = { "none", "socket", "tcp", "listen", "connecting", "connected",
				       "accepted", "sdp", "epoll", "engine", "hidden" };
	return k >= 0 && k <= K_HIDDEN ? names[k] : "?";
}

/* shim_snapshot writes a line per socket the table knows; the engine
 * publishes it with its own per-connection counters. */
int shim_snapshot(char *buf, int len)
{
	int o = 0;
	if (len <= 0)
		return 0;
	buf[0] = 0;
	for (int fd = 0, end = atomic_load(&fd_end); fd < end && o < len - 256; fd++) {
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
void shim_own_fd(int fd, int own)
{
	if (own)
		entry_new(fd, K_ENGINE, 0);
	else
		entry_reset(fd);
}
