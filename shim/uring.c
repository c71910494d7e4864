/* System calls an application makes through syscall(2) rather than libc's
 * wrappers, where they concern the shim's descriptors.
 *
 * libuv (Node.js 22 and later) adds and changes its epoll registrations by
 * submitting IORING_OP_EPOLL_CTL on an io_uring of its own, set up and
 * entered through syscall(); it closes descriptors with syscall(SYS_close).
 * Neither reaches the shim's epoll_ctl() and close(). So the shim exports
 * syscall(): io_uring_setup is remembered (the submission ring is mapped a
 * second time, read-only to this file in spirit: only whole entries are
 * rewritten, before the kernel sees them), io_uring_enter first takes the
 * EPOLL_CTL entries that name a descriptor of the shim's, applies them with
 * the shim's epoll_ctl() and turns them into NOPs (the completion carries 0,
 * as EPOLL_CTL's would); entries that read, write, poll or shut down an SDP
 * connection are carried out by the shim (shim/uring_ops.c), and so are
 * cancellations of those; socket commands (URING_CMD: SIOCINQ, SIOCOUTQ,
 * getsockopt, setsockopt) on a descriptor of the shim's go to its ioctl(),
 * getsockopt() and setsockopt(), which know an SDP connection's bytes and
 * keep what the socket's options say; SYS_close goes to close() and
 * SYS_setsockopt to setsockopt(). Every other call goes to libc's syscall()
 * unchanged.
 *
 * A ring the application asks a kernel thread to poll (IORING_SETUP_SQPOLL,
 * which would take entries without io_uring_enter) is set up without the
 * thread: its submission flags always ask for io_uring_enter
 * (IORING_SQ_NEED_WAKEUP), which submits every published entry.
 *
 * Not covered: rings in memory the application provides
 * (IORING_SETUP_NO_MMAP), registered (fixed) descriptors, and system calls
 * made without libc at all (liburing's: shim/liburing.c). */
#include <dlfcn.h>
#include <errno.h>
#include <linux/io_uring.h>
#include <linux/sockios.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* Newer than some systems' headers (Linux 6.5 and 6.6); libuv 1.51 sets the
 * second. */
#ifndef IORING_SETUP_NO_MMAP
#define IORING_SETUP_NO_MMAP (1U << 14)
#endif
#ifndef IORING_SETUP_NO_SQARRAY
#define IORING_SETUP_NO_SQARRAY (1U << 16)
#endif

#include "uring.h"

typedef long (*syscall_fn)(long, ...);

static syscall_fn libc_syscall(void)
{
	static _Atomic(syscall_fn) f;
	syscall_fn s = atomic_load_explicit(&f, memory_order_acquire);
	if (!s) {
		s = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
		atomic_store_explicit(&f, s, memory_order_release);
	}
	return s;
}

long shim_syscall7(long n, long a, long b, long c, long d, long e, long f)
{
	return libc_syscall()(n, a, b, c, d, e, f);
}

/* ---- rings ------------------------------------------------------------- */

#define RINGS 64

static struct ring {
	int fd;               /* the ring's descriptor, -1: free */
	void *sq;             /* the submission ring, mapped here too */
	size_t sq_len;
	struct io_uring_sqe *sqes;
	size_t sqes_len;
	unsigned sqe_size;    /* 64, or 128 with IORING_SETUP_SQE128 */
	struct io_sqring_offsets off;
	int no_array;         /* IORING_SETUP_NO_SQARRAY: entry i is sqes[i] */
	int skip_ok;          /* IORING_FEAT_CQE_SKIP: entries may complete unseen */
	int polled;           /* asked for IORING_SETUP_SQPOLL, set up without it */
} rings[RINGS];
static int n_rings;
/* Recursive: an entry taken while the ring is looked at may close a
 * descriptor (take_close), and close() forgets rings. */
static pthread_mutex_t rings_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

static void ring_unmap(struct ring *r)
{
	if (r->sq)
		munmap(r->sq, r->sq_len);
	if (r->sqes)
		munmap(r->sqes, r->sqes_len);
	memset(r, 0, sizeof *r);
	r->fd = -1;
}

/* ring_seen maps a new ring's submission queue (after io_uring_setup);
 * polled: the application asked for a kernel thread to poll it. */
static void ring_seen(int fd, const struct io_uring_params *p, int polled)
{
	if (p->flags & IORING_SETUP_NO_MMAP)
		return;
	struct ring r = { .fd = fd, .off = p->sq_off, .polled = polled };
	r.sqe_size = (p->flags & IORING_SETUP_SQE128) ? 128 : 64;
	r.no_array = !!(p->flags & IORING_SETUP_NO_SQARRAY);
	r.skip_ok = !!(p->features & IORING_FEAT_CQE_SKIP);
	r.sq_len = r.no_array ? p->sq_off.dropped + sizeof(uint32_t) : p->sq_off.array + p->sq_entries * sizeof(uint32_t);
	r.sqes_len = (size_t)p->sq_entries * r.sqe_size;
	r.sq = mmap(NULL, r.sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
	r.sqes = mmap(NULL, r.sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
	if (r.sq == MAP_FAILED || r.sqes == MAP_FAILED) {
		if (r.sq != MAP_FAILED)
			munmap(r.sq, r.sq_len);
		if (r.sqes != MAP_FAILED)
			munmap(r.sqes, r.sqes_len);
		shim_log(1, "io_uring %d: cannot map its submission queue (%s): epoll registrations made on it are not seen",
			 fd, strerror(errno));
		return;
	}
	if (polled) {
		/* No kernel thread: the application's enter is asked for on every
		 * submission (the flag stays; the kernel sets it only for SQPOLL). */
		atomic_fetch_or_explicit((_Atomic uint32_t *)((char *)r.sq + p->sq_off.flags), IORING_SQ_NEED_WAKEUP,
					 memory_order_release);
		shim_log(2, "io_uring %d: set up without the kernel thread it asked to poll its submissions "
			    "(IORING_SETUP_SQPOLL), so that the shim sees them", fd);
	}
	pthread_mutex_lock(&rings_mu);
	int i;
	for (i = 0; i < n_rings && rings[i].fd >= 0 && rings[i].fd != fd; i++)
		;
	if (i < RINGS) {
		if (i < n_rings && rings[i].fd == fd)
			ring_unmap(&rings[i]);
		rings[i] = r;
		if (i == n_rings)
			n_rings++;
	} else {
		munmap(r.sq, r.sq_len);
		munmap(r.sqes, r.sqes_len);
	}
	pthread_mutex_unlock(&rings_mu);
}

int uring_watched(void)
{
	return atomic_load_explicit((_Atomic int *)&n_rings, memory_order_relaxed) != 0;
}

void uring_forget(int fd)
{
	if (!atomic_load_explicit((_Atomic int *)&n_rings, memory_order_relaxed))
		return;
	pthread_mutex_lock(&rings_mu);
	for (int i = 0; i < n_rings; i++)
		if (rings[i].fd == fd)
			ring_unmap(&rings[i]);
	pthread_mutex_unlock(&rings_mu);
}

#define NOP_INJECT_RESULT (1U << 0) /* IORING_NOP_INJECT_RESULT (Linux 6.12): sqe->len is the result */

/* uring_to_nop makes sqe a NOP that completes with res: 0 on every
 * kernel, an error through IORING_NOP_INJECT_RESULT (Linux 6.12; before it,
 * the NOP itself fails with EINVAL: still an error). */
void uring_to_nop(struct io_uring_sqe *sqe, int res)
{
	uint64_t data = sqe->user_data;
	uint8_t flags = sqe->flags;
	memset(sqe, 0, 64);
	sqe->opcode = IORING_OP_NOP;
	sqe->flags = flags;
	sqe->user_data = data;
	if (res) {
		sqe->rw_flags = NOP_INJECT_RESULT;
		sqe->len = (uint32_t)res;
	}
}

/* take_epoll_ctl applies one EPOLL_CTL entry naming a descriptor of the
 * shim's with the shim's epoll_ctl() and makes it a NOP that completes with
 * epoll_ctl's result. */
static void take_epoll_ctl(struct io_uring_sqe *sqe)
{
	int epfd = sqe->fd, op = (int)sqe->len, fd = (int)sqe->off;
	struct epoll_event ev = { 0 };
	if (sqe->addr && op != EPOLL_CTL_DEL)
		memcpy(&ev, (void *)(uintptr_t)sqe->addr, sizeof ev);
	int rc = epoll_ctl(epfd, op, fd, op == EPOLL_CTL_DEL ? NULL : &ev);
	uring_to_nop(sqe, rc < 0 ? -errno : 0);
}

/* take_close closes a descriptor of the shim's with close(), so that its
 * state goes with it, and makes the entry a NOP. */
static void take_close(struct io_uring_sqe *sqe)
{
	int rc = close(sqe->fd);
	uring_to_nop(sqe, rc < 0 ? -errno : 0);
}

/* Socket commands (IORING_OP_URING_CMD on a socket, Linux 6.7): this
 * file may be built with headers that predate them, so their numbers and
 * the entry's fields they use are spelled out (include/uapi/linux/io_uring.h:
 * cmd_op at byte 8, level and optname at 16 and 20, optlen at 44, optval
 * at 48). */
enum { SOCK_CMD_SIOCINQ, SOCK_CMD_SIOCOUTQ, SOCK_CMD_GETSOCKOPT, SOCK_CMD_SETSOCKOPT };

static uint32_t sqe_u32(const struct io_uring_sqe *sqe, size_t off)
{
	uint32_t v;
	memcpy(&v, (const char *)sqe + off, sizeof v);
	return v;
}

/* take_sock_cmd carries out a socket command on a descriptor of the
 * shim's, as the kernel would at submission, and makes the entry a NOP
 * with the command's result: the kernel would answer SIOCINQ with the
 * bytes of the SDP stream's framing, and a timeout set behind the shim's
 * back would not bind its waits. */
static void take_sock_cmd(struct io_uring_sqe *sqe)
{
	uint32_t level = sqe_u32(sqe, 16), name = sqe_u32(sqe, 20), len = sqe_u32(sqe, 44);
	uint64_t val;
	memcpy(&val, (const char *)sqe + 48, sizeof val);
	int fd = sqe->fd, rc, res, n = 0;
	socklen_t l = len;
	switch (sqe_u32(sqe, 8)) {
	case SOCK_CMD_SIOCINQ:
	case SOCK_CMD_SIOCOUTQ:
		rc = ioctl(fd, sqe_u32(sqe, 8) == SOCK_CMD_SIOCINQ ? SIOCINQ : SIOCOUTQ, &n);
		res = rc < 0 ? -errno : n;
		break;
	case SOCK_CMD_GETSOCKOPT:
		if (level != SOL_SOCKET) {
			res = -EOPNOTSUPP; /* as the kernel: SOL_SOCKET only */
			break;
		}
		rc = getsockopt(fd, (int)level, (int)name, (void *)(uintptr_t)val, &l);
		res = rc < 0 ? -errno : (int)l;
		break;
	case SOCK_CMD_SETSOCKOPT:
		rc = setsockopt(fd, (int)level, (int)name, (const void *)(uintptr_t)val, len);
		res = rc < 0 ? -errno : 0;
		break;
	default:
		return; /* a command the shim does not know: the kernel's */
	}
	uring_to_nop(sqe, res);
}

/* moves_bytes says whether op reads, writes, polls or shuts down its
 * descriptor: on an SDP connection, the shim's to carry (shim/uring_ops.c). */
static int moves_bytes(int op)
{
	switch (op) {
	case IORING_OP_READV:
	case IORING_OP_WRITEV:
	case IORING_OP_READ_FIXED:
	case IORING_OP_WRITE_FIXED:
	case IORING_OP_POLL_ADD:
	case IORING_OP_SENDMSG:
	case IORING_OP_RECVMSG:
	case IORING_OP_READ:
	case IORING_OP_WRITE:
	case IORING_OP_SEND:
	case IORING_OP_RECV:
	case IORING_OP_SPLICE:
	case IORING_OP_TEE:
	case IORING_OP_SHUTDOWN:
	case IORING_OP_SEND_ZC:
	case IORING_OP_SENDMSG_ZC:
		return 1;
	}
	return 0;
}

/* uring_take looks at one entry about to be submitted to ring (a raw
 * ring's here, a liburing ring's from shim/liburing.c). */
void uring_take(int ring, int skip_ok, struct io_uring_sqe *sqe)
{
	int op = sqe->opcode;
	if (op == IORING_OP_ASYNC_CANCEL || op == IORING_OP_POLL_REMOVE) {
		uring_cancel_take(ring, sqe);
		return;
	}
	if (sqe->flags & IOSQE_FIXED_FILE)
		return; /* a registered file: not a descriptor the shim can name */
	if (op == IORING_OP_EPOLL_CTL) {
		if (shim_knows((int)sqe->off))
			take_epoll_ctl(sqe);
		return;
	}
	int k = shim_knows(sqe->fd);
	if (!k)
		return;
	if (op == IORING_OP_CLOSE)
		take_close(sqe);
	else if (op == IORING_OP_URING_CMD)
		take_sock_cmd(sqe);
	else if (k == SHIM_FD_SDP && moves_bytes(op))
		uring_op_take(ring, sqe, skip_ok);
	else if (k == SHIM_FD_LISTEN && op == IORING_OP_POLL_ADD)
		uring_op_take(ring, sqe, skip_ok); /* the shim's poll() watches its SDP port too */
	else if (k == SHIM_FD_LISTEN && op == IORING_OP_ACCEPT)
		shim_listener_tcp_only(sqe->fd);
	else if (k == SHIM_FD_OTHER && op == IORING_OP_CONNECT)
		shim_connect_tcp_only(sqe->fd);
}

/* ring_submitting looks at the entries io_uring_enter is about to submit,
 * and returns how many to submit: on a ring set up without the kernel
 * thread it asked for, every published entry (such a ring's application
 * may pass 0, the thread being the one to take them). */
static unsigned ring_submitting(int fd, unsigned to_submit)
{
	if (!atomic_load_explicit((_Atomic int *)&n_rings, memory_order_relaxed))
		return to_submit;
	pthread_mutex_lock(&rings_mu);
	struct ring *r = NULL;
	for (int i = 0; i < n_rings && !r; i++)
		if (rings[i].fd == fd)
			r = &rings[i];
	if (r) {
		char *sq = r->sq;
		uint32_t head = atomic_load_explicit((_Atomic uint32_t *)(sq + r->off.head), memory_order_acquire);
		uint32_t tail = atomic_load_explicit((_Atomic uint32_t *)(sq + r->off.tail), memory_order_acquire);
		uint32_t mask = *(uint32_t *)(sq + r->off.ring_mask);
		uint32_t *array = (uint32_t *)(sq + r->off.array);
		if (r->polled)
			to_submit = tail - head;
		uint32_t n = tail - head < to_submit ? tail - head : to_submit;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t idx = r->no_array ? ((head + i) & mask) : array[(head + i) & mask];
			if ((size_t)idx * r->sqe_size >= r->sqes_len)
				continue;
			struct io_uring_sqe *sqe = (struct io_uring_sqe *)((char *)r->sqes + (size_t)idx * r->sqe_size);
			uring_take(r->fd, r->skip_ok, sqe);
		}
	}
	pthread_mutex_unlock(&rings_mu);
	return to_submit;
}

/* Like libc's, it takes six arguments whatever the call: reading the ones a
 * caller did not pass is reading its stack, harmless, and not a fault for
 * AddressSanitizer to report. */
__attribute__((no_sanitize_address)) EXPORT long syscall(long n, ...)
{
	va_list ap;
	va_start(ap, n);
	long a[6];
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	switch (n) {
	case SYS_close:
		return close((int)a[0]);
	case SYS_pidfd_getfd:
		return pidfd_getfd((int)a[0], (int)a[1], (unsigned)a[2]);
	case SYS_setsockopt: /* the hook keeps what SDP needs of options (timeouts, TCP_NODELAY) */
		return setsockopt((int)a[0], (int)a[1], (int)a[2], (const void *)a[3], (socklen_t)a[4]);
	case SYS_io_uring_enter:
		a[1] = ring_submitting((int)a[0], (unsigned)a[1]);
		break;
	case SYS_io_uring_setup: {
		/* A ring polled by a kernel thread takes entries without
		 * io_uring_enter, where the shim sees them: it is set up
		 * without the thread (the application sees the flags it
		 * passed, and IORING_SQ_NEED_WAKEUP always set). */
		struct io_uring_params *p = (struct io_uring_params *)a[1];
		uint32_t asked = p ? p->flags : 0;
		int polled = (asked & IORING_SETUP_SQPOLL) && !(asked & IORING_SETUP_NO_MMAP);
		if (polled)
			p->flags &= ~(IORING_SETUP_SQPOLL | IORING_SETUP_SQ_AFF);
		long fd = libc_syscall()(n, a[0], a[1], a[2], a[3], a[4], a[5]);
		int saved = errno;
		if (p)
			p->flags = asked;
		if (fd >= 0 && p)
			ring_seen((int)fd, p, polled);
		errno = saved;
		return fd;
	}
	}
	return libc_syscall()(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
