/* shim/lifecycle.c: hooks of a descriptor's life: close, dup, fcntl, ioctl, sendfile, shutdown, names, options. */
#include "shim.h"

/* ---- hooks: life cycle ---------------------------------------------------- */

/* forget drops what we know of fd before the descriptor goes away. */
static void forget(int fd, struct fdent *e)
{
	int k = atomic_load(&e->kind);
	if (k == K_LISTEN && e->hidden >= 0) {
		entry_reset(e->hidden);
		real.close(e->hidden);
		e->hidden = -1;
	}
	if (e->dupped)
		epoll_follow(fd, e);
	if (k == K_SDP && e->engine_pid == getpid())
		eng.close(fd);
	if (k == K_EPOLL)
		epset_clear(e);
	entry_reset(fd);
}

/* drop_frame reads and drops the peer's handshake frame (MPA Request or
 * Reply) waiting on fd, unless bytes follow it: those are the peer's
 * application data (a connecting side sends right after its Reply), and a
 * close with them unread resets, as TCP's does. It returns what the peek
 * returned: -1 with EAGAIN when nothing is waiting. */
static ssize_t drop_frame(int fd)
{
	unsigned char b[512];
	ssize_t n = real.recv(fd, b, sizeof b, MSG_DONTWAIT | MSG_PEEK);
	if (n <= 0)
		return n;
	if (n >= 20 && memcmp(b, "MPA ID Re", 9) == 0 &&
	    n > (ssize_t)(20 + ((size_t)b[18] << 8 | b[19])))
		return n;
	ssize_t r = real.recv(fd, b, (size_t)n, MSG_DONTWAIT);
	(void)r;
	return n;
}

/* fin_first shuts fd's sending side down before a close when the peer's
 * frame has not come yet but may be on its way (its side is taking the
 * connection over): arriving between our peek and the close, or after it, it
 * would make the kernel reset. With the FIN first the peer reads end of
 * stream before any reset; a frame that came meanwhile is then dropped. Not
 * for a close that SO_LINGER with a zero timeout makes an abort. */
static void fin_first(int fd)
{
	struct linger l = {0};
	socklen_t ll = sizeof l;
	if (real.getsockopt(fd, SOL_SOCKET, SO_LINGER, &l, &ll) == 0 && l.l_onoff && l.l_linger == 0)
		return;
	if (real.shutdown(fd, SHUT_WR) == 0)
		drop_frame(fd);
}

/* drain_unread makes the close of a connection that was never handed to the
 * engine send a FIN, as TCP's would, and not the RST the kernel sends for a
 * socket closed with unread bytes: the peer reads end of stream. Only the
 * sole holder of the socket may: a duplicate or a child process may still
 * need those bytes. */
static void drain_unread(int fd, struct fdent *e)
{
	if (e->dupped || e->shared || e->born_forks != atomic_load(&n_forks))
		return;
	int err = errno; /* a close that succeeds leaves errno as it found it */
	if (drop_frame(fd) < 0 && errno == EAGAIN)
		fin_first(fd);
	errno = err;
}

/* drain_unused_at_exit does for the process's end what close() does for
 * one descriptor: the kernel closes every socket of a process that exits,
 * and a connection never handed to the engine may hold the peer's
 * handshake frame unread, which would make that close a reset where TCP's
 * is a FIN (tests/edges/st_exit_without_close). It calls nothing that locks
 * (_exit may run in a signal handler). */
void drain_unused_at_exit(void)
{
	if (shares_parents_memory())
		return; /* a vfork child's descriptors are its parent's */
	int end = atomic_load(&fd_end); /* past the highest entry ever made: a process without sockets scans nothing */
	for (int fd = 0; fd < end; fd++) {
		struct fdent *e = ours(fd);
		if (!e)
			continue;
		int k = atomic_load(&e->kind);
		if (k == K_ACTIVE || k == K_PASSIVE)
			drain_unread(fd, e);
	}
}

EXPORT int close(int fd)
{
	need_real();
	struct fdent *e = ours(fd);
	if ((e || uring_watched()) && shares_parents_memory())
		return real.close(fd); /* a vfork child closing its copy (subprocess's close_fds) */
	uring_forget(fd); /* an io_uring the shim watches (shim/uring.c) */
	if (e) {
		int k = atomic_load(&e->kind);
		if ((k == K_ENGINE && engine_pid == getpid()) || k == K_HIDDEN)
			return 0; /* ours: it stays, and its number stays taken */
		if (k == K_ACTIVE || k == K_PASSIVE)
			drain_unread(fd, e);
		forget(fd, e);
	}
	return real.close(fd);
}

/* dup_ours gives newfd, a fresh duplicate of oldfd, the same standing: a
 * second descriptor of the same SDP connection (the engine is told), of the
 * same listener, or of the same TCP socket. A connection not yet handed to
 * the engine is handed over first, so that both descriptors share one. */
static void dup_ours(int oldfd, int newfd)
{
	struct fdent *o = ours(oldfd);
	if (!o || newfd < 0 || oldfd == newfd)
		return;
	int k = atomic_load(&o->kind);
	if (k == K_EPOLL || k == K_CONNECTING)
		return; /* a duplicate of these is left to the kernel */
	struct fdent *n = entry_new(newfd, K_CAND, o->family);
	if (!n)
		return;
	logmsg(3, "fd %d: duplicate of fd %d (%s)", newfd, oldfd, kind_name(k));
	n->dupped = o->dupped = 1;
	n->passive = o->passive;
	n->app_port = o->app_port;
	n->reason = o->reason;
	n->sdp_only = o->sdp_only;
	n->engine_pid = o->engine_pid;
	n->nodelay = o->nodelay;
	n->patient = o->patient;
	n->cork = o->cork;
	n->rcvbuf = o->rcvbuf, n->sndbuf = o->sndbuf;
	n->reuse_app = o->reuse_app, n->reuse_shown = o->reuse_shown;
	n->lowat = o->lowat;
	n->hidden = -1;
	memcpy(&n->dst, &o->dst, sizeof n->dst);
	n->dstlen = o->dstlen;
	if (k == K_LISTEN) {
		/* Each descriptor of a listener needs its own hidden one. */
		n->hidden = o->hidden >= 0 ? move_high(real.fcntl(o->hidden, F_DUPFD_CLOEXEC, 0)) : -1;
		if (n->hidden >= 0)
			shim_hidden(n->hidden);
		atomic_store(&n->kind, n->hidden >= 0 ? K_LISTEN : K_TCP);
		return;
	}
	if (k == K_SDP && o->engine_pid == getpid() && eng.dup(oldfd, newfd) != 0) {
		atomic_store(&n->kind, K_NONE);
		return;
	}
	if (k == K_ACTIVE || k == K_PASSIVE) {
		/* Not handed to the engine yet (sshd dup2s before exec, where no
		 * engine may be loaded): both stay pending, and whichever is used
		 * first brings the other along (attach_siblings). */
		memcpy(n->req, o->req, o->reqlen);
		n->reqlen = o->reqlen;
		n->shared = o->shared = 1;
	}
	atomic_store(&n->kind, k);
}

EXPORT int dup(int oldfd)
{
	need_real();
	int r = real.dup(oldfd);
	if (r >= 0 && ours(oldfd))
		dup_ours(oldfd, r);
	return r;
}

EXPORT int dup2(int oldfd, int newfd)
{
	need_real();
	if ((ours(newfd) || ours(oldfd)) && shares_parents_memory())
		return real.dup2(oldfd, newfd);
	struct fdent *e = ours(newfd);
	if (e && oldfd != newfd && real.fcntl(oldfd, F_GETFD) >= 0)
		forget(newfd, e);
	int r = real.dup2(oldfd, newfd);
	if (r >= 0 && ours(oldfd))
		dup_ours(oldfd, r);
	return r;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	need_real();
	if ((ours(newfd) || ours(oldfd)) && shares_parents_memory())
		return real.dup3(oldfd, newfd, flags);
	struct fdent *e = ours(newfd);
	if (e && oldfd != newfd && real.fcntl(oldfd, F_GETFD) >= 0)
		forget(newfd, e);
	int r = real.dup3(oldfd, newfd, flags);
	if (r >= 0 && ours(oldfd))
		dup_ours(oldfd, r);
	return r;
}

static int fcntl_common(int fd, int cmd, void *arg)
{
	int r = real.fcntl(fd, cmd, arg);
	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && ours(fd) && !shares_parents_memory())
		dup_ours(fd, r);
	if (cmd == F_SETFL) {
		struct fdent *e = ours(fd);
		if (e)
			nonblock_learnt(e, r < 0 ? -1 : ((long)arg & O_NONBLOCK) != 0);
	}
	return r;
}

/* fcntl's third argument is an int or a pointer; on the ABIs glibc supports
 * both travel in the same register, so it is passed on as a pointer. */
EXPORT int fcntl(int fd, int cmd, ...)
{
	need_real();
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(fd, cmd, arg);
}

/* fcntl64 is fcntl: the same arguments on 64-bit ABIs, where off_t is 64 bits already. */
EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	need_real();
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct fdent *e = ours(fd);
	if (e && req == FIONBIO) {
		int r = real.ioctl(fd, req, arg);
		nonblock_learnt(e, r < 0 || !arg ? -1 : *(int *)arg != 0);
		return r;
	}
	if (!e || (req != FIONREAD && req != SIOCOUTQ && req != SIOCATMARK) || !is_sdp_io(e) ||
	    atomic_load(&e->kind) == K_CONNECTING)
		return real.ioctl(fd, req, arg);
	if (attach(fd, e) < 0)
		return -1;
	if (atomic_load(&e->kind) != K_SDP)
		return real.ioctl(fd, req, arg);
	if (!arg) {
		errno = EFAULT;
		return -1;
	}
	int64_t v = eng.query(fd, req == FIONREAD ? SDP_QUERY_INQ : req == SIOCATMARK ? SDP_QUERY_ATMARK : SDP_QUERY_OUTQ);
	if (v < 0 && v > -SDP_FALLBACK) {
		errno = (int)-v;
		return -1;
	}
	if (v < 0)
		v = 0;
	if (req == SIOCOUTQ) {
		int k = 0;
		if (real.ioctl(fd, SIOCOUTQ, &k) == 0)
			v += k;
	}
	*(int *)arg = v > INT_MAX ? INT_MAX : (int)v;
	return 0;
}

/* sendfile to an SDP socket reads the file in pieces through buf and sends
 * them; the file offset ends where the sent bytes end, as with the kernel's. */
static ssize_t sendfile_copy(int out, struct fdent *e, int in, off_t *off, size_t count, char *buf, size_t bsz)
{
	size_t done = 0;
	off_t pos = off ? *off : 0;
	while (done < count) {
		size_t want = count - done < bsz ? count - done : bsz;
		ssize_t r = off ? pread(in, buf, want, pos + done) : real.read(in, buf, want);
		if (r <= 0) {
			if (r < 0 && !done)
				return -1;
			break;
		}
		struct iovec v = { buf, (size_t)r };
		ssize_t w = sdp_sendv(out, e, &v, 1, done ? MSG_DONTWAIT : 0);
		ssize_t sent = w > 0 ? w : 0;
		if (!off && sent < r)
			lseek(in, (off_t)sent - r, SEEK_CUR); /* give back what was not sent */
		done += sent;
		if (w < 0 && !done) {
			if (off)
				*off = pos;
			return -1;
		}
		if (sent < r)
			break;
	}
	if (off)
		*off = pos + done;
	return done;
}

/* The buffer is the call's: one kept per thread was lost when the thread
 * exited (256 KiB each). */
static ssize_t sendfile_sdp(int out, struct fdent *e, int in, off_t *off, size_t count)
{
	const size_t bsz = 256 << 10;
	char *buf = malloc(bsz);
	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	ssize_t r = sendfile_copy(out, e, in, off, count, buf, bsz);
	int err = errno;
	free(buf);
	errno = err;
	return r;
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	need_real();
	struct fdent *e = ours(out);
	if (!e || !is_sdp_io(e))
		return real.sendfile(out, in, off, count);
	return sendfile_sdp(out, e, in, off, count);
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return sendfile(out, in, off, count);
}

/* listener_shutdown: shutdown(SHUT_RD or SHUT_RDWR) of a listener stops it
 * listening, resets its queue and wakes the threads in accept(), which then
 * fail with EINVAL. Its SDP twin goes the same way, first, so that SDP
 * clients are refused too and a waiting do_accept finds neither listening;
 * a later listen() makes both listen again. */
static int listener_shutdown(int fd, struct fdent *e, int how)
{
	int h = e->hidden;
	if (h >= 0 && (how == SHUT_RD || how == SHUT_RDWR))
		real.shutdown(h, how);
	return real.shutdown(fd, how);
}

EXPORT int shutdown(int fd, int how)
{
	need_real();
	struct fdent *e = ours(fd);
	if (e && atomic_load(&e->kind) == K_LISTEN)
		return listener_shutdown(fd, e, how);
	if (!e || !is_sdp_io(e) || atomic_load(&e->kind) == K_CONNECTING)
		return real.shutdown(fd, how);
	if (attach(fd, e) < 0)
		return -1;
	if (atomic_load(&e->kind) == K_TCP)
		return real.shutdown(fd, how);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		errno = EINVAL;
		return -1;
	}
	int r = eng.shutdown(fd, how);
	if (r < 0 && r > -SDP_FALLBACK) {
		errno = -r;
		return -1;
	}
	return 0;
}

EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	need_real();
	int r = real.getsockname(fd, addr, len);
	struct fdent *e = ours(fd);
	if (r == 0 && e && e->passive && (atomic_load(&e->kind) != K_TCP || e->at_eof) &&
	    *len >= sizeof(struct sockaddr_in))
		sa_set_port(addr, e->app_port);
	return r;
}

EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	need_real();
	int r = real.getpeername(fd, addr, len);
	struct fdent *e = ours(fd);
	if (r == 0 && e && !e->passive && *len >= sizeof(struct sockaddr_in)) {
		int k = atomic_load(&e->kind);
		if (k == K_ACTIVE || k == K_SDP || k == K_CONNECTING)
			sa_set_port(addr, e->app_port);
	}
	return r;
}

/* tcp_opt_kept: TCP_NODELAY and TCP_CORK of a socket that carries (or is
 * about to carry) SDP. The transport keeps TCP_NODELAY on and is never
 * corked: RFC 5044 assumes FPDUs do not wait for a timer, and a corked or
 * Nagled FPDU tail waits 40-200 ms. The application's values are kept
 * here instead: getsockopt gives them back, TCP_CORK holds sends as
 * MSG_MORE does (at most 200 ms, as Linux's cork), and a fallback to TCP
 * applies them to the TCP socket. */
static int tcp_opt_kept(struct fdent *e, int level, int name)
{
	if (level != IPPROTO_TCP || (name != TCP_NODELAY && name != TCP_CORK))
		return 0;
	int k = atomic_load(&e->kind);
	return k == K_CONNECTING || k == K_ACTIVE || k == K_PASSIVE || k == K_SDP;
}

/* opt_set follows an option the kernel took: a listener's twin takes
 * what its accepted sockets inherit, and SO_REUSEADDR set on an accepted
 * socket is the kernel's to show again. */
static void opt_set(struct fdent *e, int level, int name, const void *val, socklen_t len)
{
	if (level == SOL_SOCKET && name == SO_REUSEADDR) {
		e->reuse_shown = 0;
		if (val && len >= sizeof(int))
			e->reuse_app = *(const int *)val != 0;
	}
	if (atomic_load(&e->kind) == K_LISTEN && e->hidden >= 0 && is_carried(level, name))
		real.setsockopt(e->hidden, level, name, val, len);
}

/* lowat_cap is what the kernel makes of an SO_RCVLOWAT of v on a TCP
 * socket (tcp_set_rcvlowat): at most half its receive buffer, the one the
 * application set or else tcp_rmem's largest; a negative v is the most. */
static int lowat_cap(int fd, struct fdent *e, int v)
{
	static _Atomic int rmem_max; /* tcp_rmem's third value, read once */
	int cap = 0;
	if (e->rcvbuf) {
		socklen_t l = sizeof cap;
		if (real.getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cap, &l) < 0)
			cap = 0;
	} else if (!(cap = atomic_load(&rmem_max))) {
		FILE *f = fopen("/proc/sys/net/ipv4/tcp_rmem", "re");
		if (f && fscanf(f, "%*d %*d %d", &cap) != 1)
			cap = 0;
		if (f)
			fclose(f);
		atomic_store(&rmem_max, cap);
	}
	if (v < 0)
		v = INT_MAX;
	if (cap > 0 && v > cap / 2)
		v = cap / 2;
	return v ? v : 1;
}

/* set_rcvlowat: SO_RCVLOWAT. The engine reads an SDP connection's frames
 * from its kernel socket and polls it: a low-water mark there could leave
 * a frame's tail unread for ever. So the shim keeps the value (poll and
 * recv honour it, lowat_poll) and gives it to the kernel only if the
 * connection falls back to TCP. A socket not decided yet and a listener
 * have it in the kernel too (plain accepted sockets inherit it there);
 * connect() takes it off before the socket goes to an SDP port. */
int set_rcvlowat(int fd, struct fdent *e, const void *val, socklen_t len)
{
	int k = atomic_load(&e->kind);
	if (k == K_CAND || k == K_LISTEN) {
		int r = real.setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, val, len);
		socklen_t l = sizeof e->lowat;
		if (r == 0 && real.getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &e->lowat, &l) < 0)
			e->lowat = 1;
		return r;
	}
	if (k != K_CONNECTING && k != K_ACTIVE && k != K_PASSIVE && k != K_SDP)
		return real.setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, val, len);
	if (len < (socklen_t)sizeof(int) || !val) {
		errno = val ? EINVAL : EFAULT;
		return -1;
	}
	e->lowat = lowat_cap(fd, e, *(const int *)val);
	/* What is ready changed without a call into the engine: epoll sets
	 * ask about it again (epoll.c, unchanged). */
	fd_touched(e);
	return 0;
}

EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	need_real();
	struct fdent *e = ours(fd);
	if (e && level == SOL_SOCKET && (name == SO_RCVBUF || name == SO_SNDBUF) && val && len >= sizeof(int)) {
		/* A listener's buffer sizes are its accepted sockets': its SDP
		 * twin gets them too, now and when it is made (listen). */
		int r = real.setsockopt(fd, level, name, val, len);
		if (r == 0) {
			*(name == SO_RCVBUF ? &e->rcvbuf : &e->sndbuf) = *(const int *)val;
			int k = atomic_load(&e->kind);
			if (k == K_LISTEN && e->hidden >= 0)
				real.setsockopt(e->hidden, level, name, val, len);
			if (k == K_SDP && e->engine_pid == getpid() && eng.set_buffers)
				eng.set_buffers(fd, e->sndbuf, e->rcvbuf);
		}
		return r;
	}
	if (e && level == SOL_SOCKET && name == SO_RCVLOWAT)
		return set_rcvlowat(fd, e, val, len);
	if (!e)
		return real.setsockopt(fd, level, name, val, len);
	if (level != IPPROTO_TCP || (name != TCP_NODELAY && name != TCP_CORK)) {
		int r = real.setsockopt(fd, level, name, val, len);
		if (r == 0)
			opt_set(e, level, name, val, len);
		if (r == 0 && level == SOL_SOCKET && is_timeout_opt(name))
			timeouts_changed(e);
		return r;
	}
	if (!tcp_opt_kept(e, level, name)) {
		/* Not decided yet (or TCP): the kernel's, remembered for later. */
		int r = real.setsockopt(fd, level, name, val, len);
		if (r == 0)
			*(name == TCP_NODELAY ? &e->nodelay : &e->cork) = *(const int *)val != 0;
		return r;
	}
	if (!val || len < (socklen_t)sizeof(int)) {
		errno = val ? EINVAL : EFAULT;
		return -1;
	}
	int v = *(const int *)val != 0;
	if (name == TCP_NODELAY) {
		e->nodelay = v;
		return 0;
	}
	int was = e->cork;
	e->cork = v;
	if (was > 0 && !v && atomic_load(&e->kind) == K_SDP && eng.sendv_flags && e->engine_pid == my_pid())
		eng.sendv_flags(fd, NULL, 0, 0); /* uncorked: what was held goes now */
	return 0;
}

EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	need_real();
	struct fdent *e = ours(fd);
	if (e && level == SOL_SOCKET && name == SO_ERROR && atomic_load(&e->kind) == K_CONNECTING) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (real.poll(&p, 1, 0) > 0)
			resolve_connecting(fd, e, p.revents);
	}
	if (e && tcp_opt_kept(e, level, name) && val && len && *len >= sizeof(int)) {
		*(int *)val = (name == TCP_NODELAY ? e->nodelay : e->cork) > 0;
		*len = sizeof(int);
		return 0;
	}
	if (e && level == SOL_SOCKET && name == SO_RCVLOWAT && is_sdp_io(e) && val && len && *len >= sizeof(int)) {
		*(int *)val = e->lowat; /* set_rcvlowat */
		*len = sizeof(int);
		return 0;
	}
	if (e && level == SOL_SOCKET && name == SO_ERROR && atomic_load(&e->kind) == K_SDP &&
	    e->engine_pid == my_pid() && val && len && *len >= sizeof(int)) {
		/* The kernel's pending error, or the engine's (its own read may have
		 * taken the kernel's): a reset read here is reported, as by TCP, so
		 * later calls see EPIPE or end of stream (reset_once). */
		int r = real.getsockopt(fd, level, name, val, len);
		if (r == 0 && *(int *)val == 0) {
			int64_t q = eng.query(fd, SDP_QUERY_ERROR);
			if (q > 0 && (q != ECONNRESET || !atomic_load(&e->reset_told)))
				*(int *)val = (int)q;
		}
		if (r == 0 && *(int *)val == ECONNRESET)
			atomic_store(&e->reset_told, 1);
		return r;
	}
	if (e && e->reuse_shown && level == SOL_SOCKET && name == SO_REUSEADDR && val && len && *len >= sizeof(int)) {
		*(int *)val = e->reuse_shown - 1;
		*len = sizeof(int);
		return 0;
	}
	if (e && level == SOL_SOCKET && name == SO_ERROR && atomic_load(&e->reconnecting))
		settle_reconnect(fd, e, 0);
	if (e && level == SOL_SOCKET && name == SO_ERROR && atomic_load(&e->sk_err) && val && len &&
	    *len >= sizeof(int)) {
		*(int *)val = atomic_exchange(&e->sk_err, 0);
		*len = sizeof(int);
		return 0;
	}
	if (e && level == SOL_SOCKET && name == SO_ERROR && e->so_error && val && len && *len >= sizeof(int)) {
		*(int *)val = e->so_error;
		*len = sizeof(int);
		e->so_error = 0;
		return 0;
	}
	return real.getsockopt(fd, level, name, val, len);
}
