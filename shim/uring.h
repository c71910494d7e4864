/* What shim/uring.c asks of the rest of the shim about a descriptor. */
#ifndef LIBSDP_SHIM_URING_H
#define LIBSDP_SHIM_URING_H

enum { SHIM_FD_OTHER = 1, SHIM_FD_SDP = 2, SHIM_FD_LISTEN = 3 };

int shim_knows(int fd);
void shim_listener_tcp_only(int fd);
void shim_connect_tcp_only(int fd);
void shim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void uring_forget(int fd);
int uring_watched(void); /* any ring seen */
int pidfd_getfd(int pidfd, int targetfd, unsigned int flags); /* shim/passfd.c */
int shim_keep_fd(int fd);
long shim_syscall7(long n, long a, long b, long c, long d, long e, long f);

/* shim/uring_ops.c: an entry of ring that reads, writes, polls or shuts
 * down an SDP connection is carried out by the shim (1: sqe rewritten);
 * skip_ok: the ring knows IOSQE_CQE_SKIP_SUCCESS. */
struct io_uring_sqe;
void uring_take(int ring, int skip_ok, struct io_uring_sqe *sqe);
void uring_to_nop(struct io_uring_sqe *sqe, int res);
int uring_op_take(int ring, struct io_uring_sqe *sqe, int skip_ok);
/* An ASYNC_CANCEL or POLL_REMOVE of an operation the shim carries: 1 when
 * it was one (cancelled, sqe rewritten). */
int uring_cancel_take(int ring, struct io_uring_sqe *sqe);

#endif
