/* Programs that use io_uring through liburing's shared library.
 *
 * liburing enters the kernel with system call instructions of its own,
 * never through libc's syscall(), so shim/uring.c does not see its rings.
 * What it does see is the program calling liburing's exported functions:
 * the shim defines the ones that submit (io_uring_submit and its variants,
 * and the waits that submit what is queued), takes the entries queued
 * since the last submission exactly as it takes those of a raw ring (an
 * EPOLL_CTL or CLOSE of its descriptors, socket work on an SDP connection:
 * shim/uring.c, shim/uring_ops.c), then calls liburing's own function.
 * Entries are taken before liburing publishes them, so a ring polled by a
 * kernel thread (IORING_SETUP_SQPOLL) is covered too.
 *
 * The ring is read through liburing's struct io_uring, whose layout is
 * part of its ABI since 2.0 (mirrored here, so building the shim needs no
 * liburing). A program linked with liburing statically is not seen. */
#include <dlfcn.h>
#include <linux/io_uring.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "uring.h"

#define EXPORT __attribute__((visibility("default")))

/* liburing.h's struct io_uring_sq, io_uring_cq and io_uring (2.0 to 2.9). */
struct lu_sq {
	unsigned *khead, *ktail, *kring_mask, *kring_entries, *kflags, *kdropped, *array;
	struct io_uring_sqe *sqes;
	unsigned sqe_head, sqe_tail;
	size_t ring_sz;
	void *ring_ptr;
	unsigned ring_mask, ring_entries;
	unsigned pad[2];
};

struct lu_cq {
	unsigned *khead, *ktail, *kring_mask, *kring_entries, *kflags, *koverflow;
	struct io_uring_cqe *cqes;
	size_t ring_sz;
	void *ring_ptr;
	unsigned ring_mask, ring_entries;
	unsigned pad[2];
};

struct io_uring {
	struct lu_sq sq;
	struct lu_cq cq;
	unsigned flags;
	int ring_fd;
	unsigned features;
	int enter_ring_fd;
	uint8_t int_flags;
	uint8_t pad[3];
	unsigned pad2;
};

/* queued takes the entries the program queued since liburing last
 * published its tail. */
static void queued(struct io_uring *r)
{
	if (!r || r->ring_fd < 0 || !r->sq.sqes || !r->sq.kring_mask)
		return;
	unsigned mask = *r->sq.kring_mask;
	size_t size = (r->flags & IORING_SETUP_SQE128) ? 128 : 64;
	int skip_ok = !!(r->features & IORING_FEAT_CQE_SKIP);
	for (unsigned i = r->sq.sqe_head; i != r->sq.sqe_tail; i++)
		uring_take(r->ring_fd, skip_ok, (struct io_uring_sqe *)((char *)r->sq.sqes + (size_t)(i & mask) * size));
}

#define NEXT(name) ((__typeof__(&name))next(#name))

static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

struct __kernel_timespec;

EXPORT int io_uring_submit(struct io_uring *ring)
{
	queued(ring);
	return NEXT(io_uring_submit)(ring);
}

EXPORT int io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	queued(ring);
	return NEXT(io_uring_submit_and_wait)(ring, wait_nr);
}

EXPORT int io_uring_submit_and_wait_timeout(struct io_uring *ring, struct io_uring_cqe **cqe_ptr, unsigned wait_nr,
					    struct __kernel_timespec *ts, sigset_t *sigmask)
{
	queued(ring);
	return NEXT(io_uring_submit_and_wait_timeout)(ring, cqe_ptr, wait_nr, ts, sigmask);
}

EXPORT int io_uring_submit_and_get_events(struct io_uring *ring)
{
	queued(ring);
	return NEXT(io_uring_submit_and_get_events)(ring);
}

/* The waits below may submit what is queued (a wait with a time-out on a
 * kernel without IORING_FEAT_EXT_ARG queues a TIMEOUT and submits). */
EXPORT int io_uring_wait_cqes(struct io_uring *ring, struct io_uring_cqe **cqe_ptr, unsigned wait_nr,
			      struct __kernel_timespec *ts, sigset_t *sigmask)
{
	queued(ring);
	return NEXT(io_uring_wait_cqes)(ring, cqe_ptr, wait_nr, ts, sigmask);
}

EXPORT int io_uring_wait_cqe_timeout(struct io_uring *ring, struct io_uring_cqe **cqe_ptr, struct __kernel_timespec *ts)
{
	queued(ring);
	return NEXT(io_uring_wait_cqe_timeout)(ring, cqe_ptr, ts);
}

EXPORT int __io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr, unsigned submit, unsigned wait_nr,
			      sigset_t *sigmask)
{
	if (submit)
		queued(ring);
	return NEXT(__io_uring_get_cqe)(ring, cqe_ptr, submit, wait_nr, sigmask);
}
