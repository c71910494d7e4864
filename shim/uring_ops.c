/* Socket work an application submits through io_uring on an SDP
 * connection, carried out by the shim.
 *
 * An SDP connection's socket carries SDP frames, so a RECV, SEND, POLL_ADD
 * (...) the kernel ran on it would read protocol bytes, write bytes the
 * peer's engine takes for frames, or report the socket's readiness instead
 * of the connection's. At io_uring_enter, shim/uring.c hands each such
 * entry here: the shim does the operation with its own hooks (recv(),
 * send(), poll(), ...: the same path the application's libc calls take),
 * and the entry becomes a NOP that posts no completion
 * (IOSQE_CQE_SKIP_SUCCESS). The completion the application waits for is
 * posted into its ring with IORING_OP_MSG_RING from a small ring of the
 * shim's own: the operation's result and user_data, as the kernel would
 * have posted them.
 *
 * An operation that can finish at once (data is there, room to send) is
 * done before io_uring_enter goes on; one that must wait runs on a thread
 * of its own, which polls the connection and a cancel eventfd, so an
 * IORING_OP_ASYNC_CANCEL or POLL_REMOVE naming it ends it with ECANCELED.
 * Operations on one connection in one direction keep their submission
 * order.
 *
 * What stays refused (EOPNOTSUPP, logged once): multishot receives and
 * polls, provided buffers (IOSQE_BUFFER_SELECT), linked or drained entries
 * (their chain would run ahead of the shim's operation), zero-copy sends,
 * splice and tee. */
#include <errno.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uring.h"

#ifndef IORING_RECV_MULTISHOT
#define IORING_RECV_MULTISHOT (1U << 1)
#endif
#ifndef IORING_MSG_DATA
#define IORING_MSG_DATA 0
#endif

enum { DIR_READ, DIR_WRITE, DIR_POLL };

struct job {
	struct job *next;
	uint64_t seq;         /* submission order, per process */
	int ring;             /* the application's ring */
	uint64_t user_data;
	int op, fd, dir;
	void *addr;           /* buffer, iovec array or msghdr */
	uint32_t len;         /* bytes, iovec count, or poll mask */
	int flags;            /* MSG_* the application passed */
	int skip_ok;          /* IOSQE_CQE_SKIP_SUCCESS: no completion for success */
	size_t done;          /* bytes moved so far (MSG_WAITALL) */
	int efd;              /* eventfd that wakes a waiting job when cancelled */
	int cancelled;
	int finished;
};

static pthread_mutex_t jobs_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_cv = PTHREAD_COND_INITIALIZER;
static struct job *jobs; /* waiting jobs, in submission order */
static uint64_t next_seq;
static pthread_mutex_t post_mu = PTHREAD_MUTEX_INITIALIZER; /* the posting ring */

/* A forked child has none of its parent's threads: the jobs it inherits
 * would never finish and would hold later ones on their connections back. */
static void jobs_prefork(void)
{
	pthread_mutex_lock(&jobs_mu);
	pthread_mutex_lock(&post_mu);
}

static void jobs_parent(void)
{
	pthread_mutex_unlock(&post_mu);
	pthread_mutex_unlock(&jobs_mu);
}

static void jobs_child(void)
{
	jobs = NULL; /* their threads are the parent's; their memory is left */
	pthread_mutex_init(&jobs_mu, NULL);
	pthread_cond_init(&jobs_cv, NULL);
	pthread_mutex_init(&post_mu, NULL);
}

static void jobs_at_fork(void)
{
	pthread_atfork(jobs_prefork, jobs_parent, jobs_child);
}

/* ---- posting completions: IORING_OP_MSG_RING from the shim's ring ---- */

static struct {
	int fd; /* -1 none yet */
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	pid_t pid; /* a forked child makes its own */
} post_ring = { .fd = -1 };

static int post_ring_open(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	int fd = (int)shim_syscall7(SYS_io_uring_setup, 2, (long)&p, 0, 0, 0, 0);
	if (fd < 0)
		return -1;
	fd = shim_keep_fd(fd);
	size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
	char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
	void *sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
		shim_log(0, "cannot map the ring that posts io_uring completions: %s", strerror(errno));
		return -1; /* the descriptor stays kept; a later call tries again */
	}
	post_ring.sq_tail = (unsigned *)(sq + p.sq_off.tail);
	post_ring.sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	post_ring.sq_array = (unsigned *)(sq + p.sq_off.array);
	post_ring.cq_head = (unsigned *)(cq + p.cq_off.head);
	post_ring.cq_tail = (unsigned *)(cq + p.cq_off.tail);
	post_ring.cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	post_ring.cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	post_ring.sqes = sqes;
	post_ring.fd = fd;
	post_ring.pid = getpid();
	return 0;
}

/* post puts a completion (user_data, res) into ring. */
static void post(int ring, uint64_t user_data, int res)
{
	pthread_mutex_lock(&post_mu);
	if (post_ring.fd >= 0 && post_ring.pid != getpid())
		post_ring.fd = -1; /* the parent's ring: shared with it, not ours to use */
	if (post_ring.fd < 0 && post_ring_open() < 0) {
		pthread_mutex_unlock(&post_mu);
		shim_log(0, "io_uring %d: cannot post the completion of an SDP operation (%s): "
			    "the application waits for it in vain", ring, strerror(errno));
		return;
	}
	unsigned tail = *post_ring.sq_tail, idx = tail & *post_ring.sq_mask;
	struct io_uring_sqe *e = &post_ring.sqes[idx];
	memset(e, 0, sizeof *e);
	e->opcode = IORING_OP_MSG_RING;
	e->fd = ring;
	e->addr = IORING_MSG_DATA;
	e->len = (uint32_t)res;
	e->off = user_data;
	post_ring.sq_array[idx] = idx;
	__atomic_store_n(post_ring.sq_tail, tail + 1, __ATOMIC_RELEASE);
	long rc;
	do
		rc = shim_syscall7(SYS_io_uring_enter, post_ring.fd, 1, 1, IORING_ENTER_GETEVENTS, 0, 0);
	while (rc < 0 && errno == EINTR);
	int posted = 0;
	unsigned head = *post_ring.cq_head;
	if (head != __atomic_load_n(post_ring.cq_tail, __ATOMIC_ACQUIRE)) {
		posted = post_ring.cqes[head & *post_ring.cq_mask].res;
		__atomic_store_n(post_ring.cq_head, head + 1, __ATOMIC_RELEASE);
	} else if (rc < 0) {
		posted = -errno;
	}
	pthread_mutex_unlock(&post_mu);
	if (posted < 0)
		shim_log(0, "io_uring %d: posting a completion failed: %s", ring, strerror(-posted));
}

/* ---- one attempt ----------------------------------------------------- */

/* attempt does the operation once without waiting; it returns what the
 * operation returns, -EAGAIN when it would have to wait. */
static long attempt(struct job *j)
{
	int dw = MSG_DONTWAIT;
	long n;
	switch (j->op) {
	case IORING_OP_RECV:
	case IORING_OP_READ:
	case IORING_OP_READ_FIXED:
		n = recv(j->fd, (char *)j->addr + j->done, j->len - j->done, (j->flags & ~MSG_WAITALL) | dw);
		break;
	case IORING_OP_SEND:
	case IORING_OP_WRITE:
	case IORING_OP_WRITE_FIXED:
		n = send(j->fd, (const char *)j->addr + j->done, j->len - j->done, (j->flags & ~MSG_WAITALL) | dw | MSG_NOSIGNAL);
		break;
	case IORING_OP_READV: {
		struct msghdr m = { .msg_iov = j->addr, .msg_iovlen = j->len };
		n = recvmsg(j->fd, &m, dw);
		break;
	}
	case IORING_OP_WRITEV: {
		struct msghdr m = { .msg_iov = j->addr, .msg_iovlen = j->len };
		n = sendmsg(j->fd, &m, dw | MSG_NOSIGNAL);
		break;
	}
	case IORING_OP_RECVMSG:
		n = recvmsg(j->fd, j->addr, (j->flags & ~MSG_WAITALL) | dw);
		break;
	case IORING_OP_SENDMSG:
		n = sendmsg(j->fd, j->addr, j->flags | dw | MSG_NOSIGNAL);
		break;
	case IORING_OP_SHUTDOWN:
		n = shutdown(j->fd, (int)j->len);
		break;
	case IORING_OP_POLL_ADD: {
		struct pollfd p = { .fd = j->fd, .events = (short)j->len };
		n = poll(&p, 1, 0);
		if (n < 0)
			return -errno;
		n = p.revents & (j->len | POLLERR | POLLHUP | POLLNVAL);
		return n ? n : -EAGAIN;
	}
	default:
		return -EOPNOTSUPP;
	}
	return n < 0 ? (errno == EWOULDBLOCK ? -EAGAIN : -errno) : n;
}

/* step makes one attempt and says whether the job is over; *res is then
 * its result. MSG_WAITALL on a buffer goes on until the buffer is full,
 * end of stream or an error, as over TCP. */
static int step(struct job *j, long *res)
{
	long n = attempt(j);
	int whole = (j->flags & MSG_WAITALL) && j->dir != DIR_POLL &&
		    (j->op == IORING_OP_RECV || j->op == IORING_OP_SEND);
	if (n > 0 && j->dir != DIR_POLL) {
		j->done += (size_t)n;
		if (whole && j->done < j->len)
			return 0;
		*res = (long)j->done;
		return 1;
	}
	if (n == -EAGAIN && !(j->flags & MSG_DONTWAIT) && !j->cancelled)
		return 0;
	if (n == -EAGAIN && j->cancelled)
		n = -ECANCELED;
	*res = j->done ? (long)j->done : n; /* bytes moved before an error are the result */
	return 1;
}

/* ---- jobs that wait ---------------------------------------------------- */

/* first_in_line: no earlier job on the same connection and direction waits. */
static int first_in_line(const struct job *j)
{
	if (j->dir == DIR_POLL)
		return 1;
	for (const struct job *o = jobs; o && o != j; o = o->next)
		if (o->fd == j->fd && o->dir == j->dir && !o->finished)
			return 0;
	return 1;
}

static void unlink_job(struct job *j)
{
	for (struct job **p = &jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
}

static void finish(struct job *j, long res)
{
	if (!(j->skip_ok && res >= 0))
		post(j->ring, j->user_data, (int)res);
}

static void *run(void *arg)
{
	struct job *j = arg;
	long res = 0;
	pthread_mutex_lock(&jobs_mu);
	while (!first_in_line(j) && !j->cancelled)
		pthread_cond_wait(&jobs_cv, &jobs_mu);
	pthread_mutex_unlock(&jobs_mu);
	short want = j->dir == DIR_READ ? POLLIN : j->dir == DIR_WRITE ? POLLOUT : (short)j->len;
	for (;;) {
		if (__atomic_load_n(&j->cancelled, __ATOMIC_ACQUIRE)) {
			res = j->done ? (long)j->done : -ECANCELED;
			break;
		}
		if (step(j, &res))
			break;
		struct pollfd p[2] = { { .fd = j->fd, .events = want }, { .fd = j->efd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0 && errno != EINTR) {
			res = j->done ? (long)j->done : -errno;
			break;
		}
	}
	pthread_mutex_lock(&jobs_mu);
	j->finished = 1;
	unlink_job(j);
	pthread_cond_broadcast(&jobs_cv);
	pthread_mutex_unlock(&jobs_mu);
	finish(j, res);
	close(j->efd);
	free(j);
	return NULL;
}

/* start runs j on a thread of its own, which takes no signal of the
 * application's. */
static int start(struct job *j)
{
	j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (j->efd < 0)
		return -errno;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 256 << 10);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	int rc = pthread_create(&t, &a, run, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc) {
		close(j->efd);
		return -rc;
	}
	return 0;
}

/* ---- taking entries ---------------------------------------------------- */

static int direction(int op)
{
	switch (op) {
	case IORING_OP_RECV:
	case IORING_OP_READ:
	case IORING_OP_READ_FIXED:
	case IORING_OP_READV:
	case IORING_OP_RECVMSG:
		return DIR_READ;
	case IORING_OP_SEND:
	case IORING_OP_WRITE:
	case IORING_OP_WRITE_FIXED:
	case IORING_OP_WRITEV:
	case IORING_OP_SENDMSG:
	case IORING_OP_SHUTDOWN:
		return DIR_WRITE;
	case IORING_OP_POLL_ADD:
		return DIR_POLL;
	}
	return -1;
}

/* why_not says why the shim cannot carry sqe on an SDP connection, or NULL. */
static const char *why_not(const struct io_uring_sqe *sqe, int skip_ok)
{
	if (direction(sqe->opcode) < 0)
		return "zero-copy sends, splice and tee";
	if (sqe->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK | IOSQE_IO_DRAIN))
		return "linked or drained entries";
	if (sqe->flags & IOSQE_BUFFER_SELECT)
		return "provided buffers";
	if ((sqe->opcode == IORING_OP_RECV || sqe->opcode == IORING_OP_RECVMSG) && (sqe->ioprio & IORING_RECV_MULTISHOT))
		return "multishot receives";
	if (sqe->opcode == IORING_OP_POLL_ADD && (sqe->len & IORING_POLL_ADD_MULTI))
		return "multishot polls";
	if (!skip_ok)
		return "rings without IOSQE_CQE_SKIP_SUCCESS (Linux before 5.17)";
	return NULL;
}

int uring_op_take(int ring, struct io_uring_sqe *sqe, int skip_ok)
{
	const char *why = why_not(sqe, skip_ok);
	if (why) {
		static _Atomic int told;
		if (!atomic_exchange(&told, 1))
			shim_log(0, "fd %d: io_uring %s on an SDP connection are not supported; they fail with "
				    "EOPNOTSUPP (keep the program on TCP: SDP_MODE=tcp or a libsdp.conf rule)", sqe->fd, why);
		uring_to_nop(sqe, -EOPNOTSUPP);
		return 1;
	}
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, jobs_at_fork);
	struct job *j = calloc(1, sizeof *j);
	if (!j) {
		uring_to_nop(sqe, -ENOMEM);
		return 1;
	}
	j->ring = ring;
	j->user_data = sqe->user_data;
	j->op = sqe->opcode;
	j->fd = sqe->fd;
	j->dir = direction(j->op);
	j->addr = (void *)(uintptr_t)sqe->addr;
	j->len = j->op == IORING_OP_POLL_ADD ? sqe->poll32_events : sqe->len;
	j->flags = (j->op == IORING_OP_RECV || j->op == IORING_OP_SEND || j->op == IORING_OP_RECVMSG ||
		    j->op == IORING_OP_SENDMSG) ? (int)sqe->msg_flags : 0;
	j->skip_ok = !!(sqe->flags & IOSQE_CQE_SKIP_SUCCESS);
	j->efd = -1;
	uint64_t user_data = sqe->user_data;
	uint8_t flags = sqe->flags;
	/* The entry becomes a NOP that completes unseen: the shim posts. */
	memset(sqe, 0, 64);
	sqe->opcode = IORING_OP_NOP;
	sqe->flags = flags | IOSQE_CQE_SKIP_SUCCESS;
	sqe->user_data = user_data;

	pthread_mutex_lock(&jobs_mu);
	j->seq = next_seq++;
	long res;
	if (first_in_line(j) && step(j, &res)) { /* done at once */
		pthread_mutex_unlock(&jobs_mu);
		finish(j, res);
		free(j);
		return 1;
	}
	struct job **p = &jobs;
	while (*p)
		p = &(*p)->next;
	*p = j;
	int rc = start(j);
	if (rc < 0) {
		unlink_job(j);
		pthread_mutex_unlock(&jobs_mu);
		shim_log(0, "fd %d: cannot start waiting for an io_uring operation: %s", j->fd, strerror(-rc));
		finish(j, j->done ? (long)j->done : rc);
		free(j);
		return 1;
	}
	pthread_mutex_unlock(&jobs_mu);
	return 1;
}

int uring_cancel_take(int ring, struct io_uring_sqe *sqe)
{
	if (sqe->opcode == IORING_OP_ASYNC_CANCEL && sqe->cancel_flags)
		return 0; /* by descriptor, or all: the kernel's to answer */
	uint64_t target = sqe->addr;
	int found = 0;
	pthread_mutex_lock(&jobs_mu);
	for (struct job *j = jobs; j; j = j->next)
		if (j->ring == ring && j->user_data == target && !j->finished && !j->cancelled) {
			__atomic_store_n(&j->cancelled, 1, __ATOMIC_RELEASE);
			uint64_t one = 1;
			if (write(j->efd, &one, sizeof one) < 0) {
				/* a full counter wakes the poll all the same */
			}
			found = 1;
			break;
		}
	if (found)
		pthread_cond_broadcast(&jobs_cv);
	pthread_mutex_unlock(&jobs_mu);
	if (found)
		uring_to_nop(sqe, 0);
	return found;
}
