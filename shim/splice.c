/* shim/splice.c: batches (sendmmsg, recvmmsg), splice, close_range. */
#include "shim.h"

/* ---- hooks: batches, splice, close_range ---------------------------------- */

EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	need_real();
	static int (*real_sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	if (!real_sendmmsg)
		real_sendmmsg = dlsym(RTLD_NEXT, "sendmmsg");
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real_sendmmsg(fd, vec, vlen, flags);
	unsigned int i;
	for (i = 0; i < vlen; i++) {
		ssize_t n = sdp_sendv(fd, e, vec[i].msg_hdr.msg_iov, (int)vec[i].msg_hdr.msg_iovlen, flags);
		if (n < 0)
			return i ? (int)i : -1;
		vec[i].msg_len = (unsigned int)n;
		if ((size_t)n < iov_total(vec[i].msg_hdr.msg_iov, (int)vec[i].msg_hdr.msg_iovlen)) {
			i++;
			break;
		}
	}
	return (int)i;
}

EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *tmo)
{
	need_real();
	static int (*real_recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
	if (!real_recvmmsg)
		real_recvmmsg = dlsym(RTLD_NEXT, "recvmmsg");
	struct fdent *e = ours(fd);
	if (!e || !via_shim(e))
		return real_recvmmsg(fd, vec, vlen, flags, tmo);
	unsigned int i;
	for (i = 0; i < vlen; i++) {
		/* After the first message, MSG_WAITFORONE makes the rest non-blocking. */
		int f = flags & ~MSG_WAITFORONE;
		if (i && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		ssize_t n = sdp_recvv(fd, e, vec[i].msg_hdr.msg_iov, (int)vec[i].msg_hdr.msg_iovlen, f);
		if (n < 0)
			return i ? (int)i : -1;
		vec[i].msg_len = (unsigned int)n;
		vec[i].msg_hdr.msg_namelen = 0;
		vec[i].msg_hdr.msg_controllen = 0;
		vec[i].msg_hdr.msg_flags = 0;
		if (n == 0) {
			i++;
			break;
		}
	}
	return (int)i;
}

/* splice with an SDP socket at one end goes through a buffer: its bytes are
 * not in the kernel socket's queue. Reading from the socket takes no more
 * than the pipe can hold, so nothing read is ever dropped. */
EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len, unsigned int flags)
{
	need_real();
	static ssize_t (*real_splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);
	if (!real_splice)
		real_splice = dlsym(RTLD_NEXT, "splice");
	struct fdent *ei = ours(in), *eo = ours(out);
	int sdp_in = ei && is_sdp_io(ei), sdp_out = eo && is_sdp_io(eo);
	if (!sdp_in && !sdp_out)
		return real_splice(in, off_in, out, off_out, len, flags);
	char buf[65536];
	if (len > sizeof buf)
		len = sizeof buf;
	int nb = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
	if (sdp_in) {
		if (off_in) {
			errno = ESPIPE;
			return -1;
		}
		int cap = real.fcntl(out, F_GETPIPE_SZ), queued = 0;
		if (cap > 0 && real.ioctl(out, FIONREAD, &queued) == 0) {
			if (cap - queued <= 0) {
				errno = EAGAIN;
				return -1;
			}
			if ((size_t)(cap - queued) < len)
				len = (size_t)(cap - queued);
		}
		struct iovec v = { buf, len };
		ssize_t n = sdp_recvv(in, ei, &v, 1, nb);
		if (n <= 0)
			return n;
		for (ssize_t o = 0; o < n;) {
			ssize_t w = off_out ? pwrite(out, buf + o, n - o, *off_out + o) : real.write(out, buf + o, n - o);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return o ? o : -1;
			o += w;
		}
		if (off_out)
			*off_out += n;
		return n;
	}
	ssize_t n = off_in ? pread(in, buf, len, *off_in) : real.read(in, buf, len);
	if (n <= 0)
		return n;
	if (off_in)
		*off_in += n;
	struct iovec v = { buf, (size_t)n };
	return sdp_sendv(out, eo, &v, 1, 0); /* all of it: what was read cannot be put back */
}

/* close_range closes our descriptors one by one (each needs its goodbye)
 * and leaves the engine's own open. */
EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	need_real();
	static int (*real_close_range)(unsigned int, unsigned int, int);
	if (!real_close_range)
		real_close_range = dlsym(RTLD_NEXT, "close_range");
	if (!real_close_range) {
		errno = ENOSYS;
		return -1;
	}
	if (flags & CLOSE_RANGE_CLOEXEC)
		return real_close_range(first, last, flags);
	unsigned int start = first;
	for (unsigned int fd = first, end = (unsigned)atomic_load(&fd_end); fd <= last && fd < end; fd++) {
		struct fdent *e = ours((int)fd);
		if (!e)
			continue;
		if (fd > start && real_close_range(start, fd - 1, flags) < 0)
			return -1;
		close((int)fd);
		start = fd + 1;
	}
	if (start <= last && start >= first)
		return real_close_range(start, last, flags);
	return 0;
}

/* closefrom: glibc's makes the close_range system call itself, past the hook
 * above, and would close the log and the engine's descriptors (ssh and sshd
 * call it at start). */
EXPORT void closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	if (close_range((unsigned int)lowfd, ~0U, 0) == 0)
		return;
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > FD_MAX)
		max = FD_MAX;
	for (int fd = lowfd; fd < max; fd++)
		close(fd);
}
