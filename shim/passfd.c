/* shim/passfd.c: descriptors passed to or taken from another process (SCM_RIGHTS, pidfd_getfd). */
#include "shim.h"

/* ---- descriptors passed to another process (SCM_RIGHTS) ------------------
 *
 * A connection accepted on an SDP port, or connected to one, that no call
 * has handed to the engine yet (K_PASSIVE, K_ACTIVE) can be passed over a
 * Unix socket to another process, as Node's cluster module and servers with
 * worker processes do with each accepted connection. The receiving process
 * needs what the shim knows of it (the MPA Request sent on it): the sender
 * leaves that in a record named after the socket (device and inode) in a
 * directory of the user's own, and the receiver's recvmsg takes it, so its
 * first call hands the connection to its own engine. A connection the
 * engine already drives (K_SDP) cannot follow: its state is in this
 * process; such a sendmsg fails with EOPNOTSUPP and a log line, never
 * giving the other process a socket that reads protocol bytes. */

#define PASS_STALE_S 60 /* a record nobody took (the receiver not preloaded) */

static int pass_dir(char *out, size_t n, int create)
{
	unsigned uid = (unsigned)geteuid();
	snprintf(out, n, "/dev/shm/libsdp-pass-%u", uid);
	if (create && mkdir(out, 0700) < 0 && errno != EEXIST)
		return -1;
	struct stat st;
	/* Another user's directory (made first, to read or plant records) is
	 * never used. */
	if (lstat(out, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077))
		return -1;
	return 0;
}

static int pass_name(char *out, size_t n, int fd)
{
	struct stat st;
	char dir[64];
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) || pass_dir(dir, sizeof dir, 0) < 0)
		return -1;
	snprintf(out, n, "%s/%lx-%lx", dir, (unsigned long)st.st_dev, (unsigned long)st.st_ino);
	return 0;
}

/* pass_sweep removes records older than PASS_STALE_S, at most every few
 * seconds. */
static void pass_sweep(const char *dir)
{
	static _Atomic time_t last;
	time_t now = time(NULL);
	if (now - atomic_load(&last) < 10)
		return;
	atomic_store(&last, now);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	char buf[4096];
	long n;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0)
		for (long off = 0; off < n;) {
			struct {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *d = (void *)(buf + off);
			struct stat st;
			if (d->name[0] != '.' && fstatat(dfd, d->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    now - st.st_mtime > PASS_STALE_S)
				unlinkat(dfd, d->name, 0);
			off += d->reclen;
		}
	real.close(dfd);
}

/* pass_fds calls f for each descriptor of msg's SCM_RIGHTS messages; it
 * stops when f returns nonzero and returns that. */
static int pass_fds(const struct msghdr *msg, int (*f)(int fd))
{
	if (!msg->msg_control || msg->msg_controllen < sizeof(struct cmsghdr))
		return 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)msg); c; c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
			int r = f(fd);
			if (r)
				return r;
		}
	}
	return 0;
}

static int pass_check(int fd)
{
	struct fdent *e = ours(fd);
	int k = e ? atomic_load(&e->kind) : K_NONE;
	if (k == K_SDP || k == K_CONNECTING) {
		logmsg(0, "fd %d: an SDP connection in use cannot be passed to another process (SCM_RIGHTS): its state "
			  "is in this process; pass it before its first read or write, or keep the program on TCP "
			  "(SDP_MODE=tcp or a libsdp.conf rule)", fd);
		return 1;
	}
	return 0;
}

static int pass_record(int fd)
{
	struct fdent *e = ours(fd);
	int k = e ? atomic_load(&e->kind) : K_NONE;
	if (k == K_LISTEN) {
		/* The other process would accept on P but never on the SDP port. */
		listener_tcp_only(fd, e, "a listener passed to another process");
		return 0;
	}
	if (k != K_PASSIVE && k != K_ACTIVE)
		return 0;
	char dir[64], path[128], rec[64 + 2 * REQ_MAX];
	if (pass_dir(dir, sizeof dir, 1) < 0 || pass_name(path, sizeof path, fd) < 0) {
		logmsg(1, "fd %d: cannot leave its SDP state for the process it is passed to (%s)", fd, strerror(errno));
		return 0;
	}
	pass_sweep(dir);
	int len = snprintf(rec, sizeof rec, "%d,%d,%d,%u,", k, e->family, e->passive, e->app_port);
	for (int i = 0; k == K_PASSIVE && i < e->reqlen; i++)
		len += snprintf(rec + len, sizeof rec - len, "%02x", e->req[i]);
	unlink(path);
	int rfd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (rfd < 0 || real.write(rfd, rec, len) != len)
		logmsg(1, "fd %d: cannot write %s: %s", fd, path, strerror(errno));
	if (rfd >= 0)
		real.close(rfd);
	e->shared = 1; /* another process holds it now: its unread bytes are not ours to drop */
	return 0;
}

/* pass_out runs before a sendmsg that carries descriptors: -1 (errno set)
 * when one of them cannot be passed. */
int pass_out(const struct msghdr *msg)
{
	if (pass_fds(msg, pass_check)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	pass_fds(msg, pass_record);
	return 0;
}

static int pass_take(int fd)
{
	char path[128], rec[64 + 2 * REQ_MAX + 1];
	if (pass_name(path, sizeof path, fd) < 0)
		return 0;
	int rfd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0) {
		/* a plain socket, or one its sender did not know; a listener
		 * serves SDP here (its sender's twin was closed when it went) */
		adopt_listener(fd, "passed from another process");
		return 0;
	}
	struct stat st;
	ssize_t n = fstat(rfd, &st) == 0 && st.st_uid == geteuid() ? real.read(rfd, rec, sizeof rec - 1) : -1;
	real.close(rfd);
	unlink(path);
	int k, fam, passive, used = 0;
	unsigned port;
	if (n <= 0)
		return 0;
	rec[n] = 0;
	if (sscanf(rec, "%d,%d,%d,%u,%n", &k, &fam, &passive, &port, &used) < 4 || !used ||
	    (k != K_PASSIVE && k != K_ACTIVE) || adopt_record(fd, k, fam, passive, port, -1, rec + used) < 0)
		logmsg(1, "fd %d: passed to this process with an SDP record it cannot use", fd);
	else
		logmsg(2, "fd %d: an SDP connection passed from another process", fd);
	return 0;
}

/* pass_in runs after a recvmsg that received descriptors. */
void pass_in(const struct msghdr *msg)
{
	pass_fds(msg, pass_take);
}

/* ---- descriptors taken from another process (pidfd_getfd) ---------------
 *
 * pidfd_getfd copies a descriptor out of another process without that
 * process knowing: nothing of the shim's state comes along. A listener
 * serves SDP here if its SDP port is free (adopt_listener); a connection on
 * an SDP port (the kernel says whose: the same check a client makes before
 * it connects) has its state in the other process, so using it here fails
 * with EIO and a log line, never reading a protocol byte. */

static int app_port_of(int sdp)
{
	int span = 65536 - 1024;
	return ((sdp - 1024 - cfg.port_offset) % span + span) % span + 1024;
}

/* on_sdp_port says whether a is an address on an SDP port S(P) that is P's
 * SDP twin, by the kernel's word. */
static int on_sdp_port(const struct sockaddr *a)
{
	int s = sa_port(a);
	char detail[160];
	unsigned uid;
	return s > 0 && trust_check(a, app_port_of(s), s, detail, sizeof detail, &uid) == TRUST_SDP;
}

static void taken_fd(int fd)
{
	adopt_listener(fd, "taken from another process (pidfd_getfd)");
	if (ours(fd))
		return;
	int dom = 0, type = 0;
	socklen_t l = sizeof dom;
	if (real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 || (dom != AF_INET && dom != AF_INET6))
		return;
	l = sizeof type;
	if (real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM)
		return;
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof me, pl = sizeof peer;
	if (real.getsockname(fd, (struct sockaddr *)&me, &ml) < 0 || real.getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
		return;
	if (!on_sdp_port((struct sockaddr *)&me) && !on_sdp_port((struct sockaddr *)&peer))
		return;
	struct fdent *e = entry_new(fd, K_SDP, dom);
	if (!e)
		return;
	e->engine_pid = -1; /* another process's: unusable here */
	logmsg(0, "fd %d: an SDP connection taken from another process (pidfd_getfd): its state is in that "
		  "process, so using it here fails with EIO; pass it over a Unix socket (SCM_RIGHTS) before its "
		  "first use, or keep the program on TCP (SDP_MODE=tcp or a libsdp.conf rule)", fd);
}

EXPORT int pidfd_getfd(int pidfd, int targetfd, unsigned int flags)
{
	int fd = (int)shim_syscall7(SYS_pidfd_getfd, pidfd, targetfd, flags, 0, 0, 0);
	if (fd >= 0) {
		int saved = errno;
		taken_fd(fd);
		errno = saved;
	}
	return fd;
}
