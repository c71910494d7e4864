/* uring: what a program observes when it registers and uses connected and
 * listening sockets through io_uring (raw io_uring_setup/io_uring_enter via
 * syscall(2), as libuv does), printed line by line for TestURing, which
 * compares the lines plain and preloaded. Lines starting "recv-through-ring"
 * are compared by the test's own rule (an SDP connection's bytes cannot be
 * read past the engine: the same bytes, or an error, never other bytes).
 *
 *   uring PORT [sqpoll]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

static struct {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array, *sq_flags, *cq_head, *cq_tail, *cq_mask;
	int sqpoll; /* a kernel thread takes the entries */
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
} ring;

static void die(const char *what)
{
	printf("error %s: %s\n", what, strerror(errno));
	exit(1);
}

static void ring_init(int sqpoll)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	if (sqpoll) {
		p.flags = IORING_SETUP_SQPOLL;
		p.sq_thread_idle = 100;
		ring.sqpoll = 1;
	}
	ring.fd = (int)syscall(SYS_io_uring_setup, 8, &p);
	if (ring.fd < 0)
		die("io_uring_setup");
	size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring.fd, IORING_OFF_SQ_RING);
	char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring.fd, IORING_OFF_CQ_RING);
	ring.sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_POPULATE, ring.fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || ring.sqes == MAP_FAILED)
		die("mmap");
	ring.sq_tail = (unsigned *)(sq + p.sq_off.tail);
	ring.sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	ring.sq_array = (unsigned *)(sq + p.sq_off.array);
	ring.sq_flags = (unsigned *)(sq + p.sq_off.flags);
	ring.cq_head = (unsigned *)(cq + p.cq_off.head);
	ring.cq_tail = (unsigned *)(cq + p.cq_off.tail);
	ring.cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	ring.cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

/* enter submits what is published and waits for wait completions: on a
 * ring a kernel thread polls, io_uring_enter only wakes the thread when it
 * asks for it (and submits nothing itself: to_submit 0). */
static void enter(unsigned wait)
{
	unsigned flags = wait ? IORING_ENTER_GETEVENTS : 0, n = 1;
	if (ring.sqpoll) {
		n = 0;
		if (__atomic_load_n(ring.sq_flags, __ATOMIC_ACQUIRE) & IORING_SQ_NEED_WAKEUP)
			flags |= IORING_ENTER_SQ_WAKEUP;
		else if (!wait)
			return;
	}
	if (syscall(SYS_io_uring_enter, ring.fd, n, wait, flags, NULL, 0) < 0 && errno != EINTR)
		die("io_uring_enter");
}

/* queue puts one entry in the submission queue. */
static void queue(const struct io_uring_sqe *e)
{
	unsigned tail = *ring.sq_tail, idx = tail & *ring.sq_mask;
	ring.sqes[idx] = *e;
	ring.sq_array[idx] = idx;
	__atomic_store_n(ring.sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* submit runs one entry and returns its completion's result. */
static int submit(const struct io_uring_sqe *e)
{
	queue(e);
	enter(1);
	while (*ring.cq_head == __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE))
		enter(1); /* a kernel thread may not have taken it yet */
	unsigned head = *ring.cq_head;
	int res = ring.cqes[head & *ring.cq_mask].res;
	__atomic_store_n(ring.cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

/* push queues one entry and submits it without waiting for it. */
static void push(const struct io_uring_sqe *e)
{
	queue(e);
	enter(0);
}

/* pending says whether no completion is there yet. */
static int pending(void)
{
	return *ring.cq_head == __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE);
}

/* reap waits for n completions and returns them ordered by user_data. */
static void reap(int n, struct io_uring_cqe *out)
{
	for (int i = 0; i < n; i++) {
		while (pending())
			enter(1);
		unsigned head = *ring.cq_head;
		out[i] = ring.cqes[head & *ring.cq_mask];
		__atomic_store_n(ring.cq_head, head + 1, __ATOMIC_RELEASE);
	}
	for (int i = 1; i < n; i++)
		for (int k = i; k > 0 && out[k].user_data < out[k - 1].user_data; k--) {
			struct io_uring_cqe t = out[k];
			out[k] = out[k - 1];
			out[k - 1] = t;
		}
}

static struct io_uring_sqe entry(int op, int fd, const void *addr, unsigned len, int flags, uint64_t data)
{
	struct io_uring_sqe e;
	memset(&e, 0, sizeof e);
	e.opcode = (uint8_t)op;
	e.fd = fd;
	e.addr = (uint64_t)(uintptr_t)addr;
	e.len = len;
	e.msg_flags = (uint32_t)flags;
	e.user_data = data;
	return e;
}

/* read_all reads exactly n bytes from fd with read(). */
static void read_all(int fd, char *b, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);
		if (r <= 0)
			die("read_all");
		got += (size_t)r;
	}
}

static int ring_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct io_uring_sqe e;
	memset(&e, 0, sizeof e);
	e.opcode = IORING_OP_EPOLL_CTL;
	e.fd = epfd;
	e.off = (uint64_t)fd;
	e.len = (uint32_t)op;
	e.addr = (uint64_t)(uintptr_t)ev;
	return submit(&e);
}

/* Socket commands (IORING_OP_URING_CMD, Linux 6.7), spelled out for older
 * headers: cmd_op at byte 8, level and optname at 16 and 20, optlen at 44,
 * optval at 48 of the entry. */
enum { SOCK_CMD_SIOCINQ, SOCK_CMD_SIOCOUTQ, SOCK_CMD_GETSOCKOPT, SOCK_CMD_SETSOCKOPT };

static int sock_cmd(int fd, uint32_t op, uint32_t level, uint32_t name, void *val, uint32_t len)
{
	struct io_uring_sqe e;
	memset(&e, 0, sizeof e);
	e.opcode = IORING_OP_URING_CMD;
	e.fd = fd;
	uint64_t v = (uint64_t)(uintptr_t)val;
	char *p = (char *)&e;
	memcpy(p + 8, &op, 4);
	memcpy(p + 16, &level, 4);
	memcpy(p + 20, &name, 4);
	memcpy(p + 44, &len, 4);
	memcpy(p + 48, &v, 8);
	return submit(&e);
}

/* late_write writes "slow" to the descriptor *arg after 300 ms: data that
 * only a receive without a timeout waits for. */
static void *late_write(void *arg)
{
	struct timespec ts = { 0, 300 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	if (write(*(int *)arg, "slow", 4) != 4)
		die("write");
	return NULL;
}

static const char *res_name(int res)
{
	static char b[32];
	if (res >= 0) {
		snprintf(b, sizeof b, "%d", res);
		return b;
	}
	snprintf(b, sizeof b, "-%s", strerrorname_np(-res) ? strerrorname_np(-res) : "?");
	return b;
}

/* wait_events waits at most ms for ep and prints what it reports for tag. */
static void wait_events(int ep, int ms, const char *what)
{
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, ms);
	printf("%s: epoll_wait %d", what, n);
	for (int i = 0; i < n; i++)
		printf(" [%s%s%s]", ev[i].data.u32 == 1 ? "conn" : ev[i].data.u32 == 2 ? "listener" : "?",
		       ev[i].events & EPOLLIN ? " in" : "", ev[i].events & EPOLLRDHUP ? " rdhup" : "");
	printf("\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: uring PORT [sqpoll]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(60); /* a wait that never ends fails the run instead of hanging it */
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 8) < 0)
		die("listen");
	ring_init(argc > 2 && !strcmp(argv[2], "sqpoll"));
	int ep = epoll_create1(EPOLL_CLOEXEC);

	/* A listener registered through the ring reports a client. */
	struct epoll_event lev = { .events = EPOLLIN, .data.u32 = 2 };
	printf("listener epoll_ctl through the ring: %s\n", res_name(ring_epoll_ctl(ep, EPOLL_CTL_ADD, l, &lev)));
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof a) < 0)
		die("connect");
	wait_events(ep, 5000, "after connect");
	int s = accept(l, NULL, NULL);
	if (s < 0)
		die("accept");
	printf("accepted\n");

	/* A connection registered through the ring: quiet, then readable. */
	struct epoll_event cev = { .events = EPOLLIN | EPOLLRDHUP, .data.u32 = 1 };
	printf("connection epoll_ctl add through the ring: %s\n", res_name(ring_epoll_ctl(ep, EPOLL_CTL_ADD, s, &cev)));
	printf("again: %s\n", res_name(ring_epoll_ctl(ep, EPOLL_CTL_ADD, s, &cev)));
	struct epoll_event off = { .events = EPOLLIN, .data.u32 = 2 };
	ring_epoll_ctl(ep, EPOLL_CTL_DEL, l, &off);
	wait_events(ep, 0, "before data");
	if (write(c, "hello", 5) != 5)
		die("write");
	wait_events(ep, 5000, "after data");
	char buf[64];
	ssize_t n = read(s, buf, sizeof buf);
	printf("read %zd '%.*s'\n", n, (int)(n > 0 ? n : 0), buf);

	/* Bytes read through the ring itself. */
	if (write(c, "world", 5) != 5)
		die("write");
	wait_events(ep, 5000, "after more data");
	struct io_uring_sqe e;
	memset(&e, 0, sizeof e);
	e.opcode = IORING_OP_RECV;
	e.fd = s;
	e.addr = (uint64_t)(uintptr_t)buf;
	e.len = sizeof buf;
	e.msg_flags = MSG_DONTWAIT;
	int r = submit(&e);
	printf("recv-through-ring %s '%.*s'\n", res_name(r), r > 0 ? r : 0, buf);
	if (r < 0) {
		n = read(s, buf, sizeof buf);
		printf("read %zd '%.*s'\n", n, (int)(n > 0 ? n : 0), buf);
	}

	/* Sends and writes through the ring; the client reads them. */
	struct io_uring_cqe cq[2];
	struct io_uring_sqe x = entry(IORING_OP_SEND, s, "pong", 4, 0, 1);
	printf("send through the ring: %s\n", res_name(submit(&x)));
	x = entry(IORING_OP_WRITE, s, "abc", 3, 0, 2);
	printf("write through the ring: %s\n", res_name(submit(&x)));
	read_all(c, buf, 7);
	printf("client read '%.7s'\n", buf);
	struct iovec wv[2] = { { "de", 2 }, { "fgh", 3 } };
	x = entry(IORING_OP_WRITEV, s, wv, 2, 0, 3);
	printf("writev through the ring: %s\n", res_name(submit(&x)));
	struct msghdr wm = { .msg_iov = wv, .msg_iovlen = 2 };
	x = entry(IORING_OP_SENDMSG, s, &wm, 0, 0, 4);
	printf("sendmsg through the ring: %s\n", res_name(submit(&x)));
	read_all(c, buf, 10);
	printf("client read '%.10s'\n", buf);

	/* A receive that waits for its bytes, and one that waits for all. */
	memset(buf, 0, sizeof buf);
	x = entry(IORING_OP_RECV, s, buf, sizeof buf, 0, 5);
	push(&x);
	printf("recv before data: %s\n", pending() ? "pending" : "completed");
	if (write(c, "late", 4) != 4)
		die("write");
	reap(1, cq);
	printf("recv after data: %s '%.*s'\n", res_name(cq[0].res), cq[0].res > 0 ? cq[0].res : 0, buf);
	x = entry(IORING_OP_RECV, s, buf, 8, MSG_WAITALL, 6);
	push(&x);
	if (write(c, "1234", 4) != 4 || write(c, "5678", 4) != 4)
		die("write");
	reap(1, cq);
	printf("recv waitall: %s '%.*s'\n", res_name(cq[0].res), cq[0].res > 0 ? cq[0].res : 0, buf);
	x = entry(IORING_OP_READ, s, buf, sizeof buf, 0, 7);
	push(&x);
	printf("read before data: %s\n", pending() ? "pending" : "completed");
	if (write(c, "xyz", 3) != 3)
		die("write");
	reap(1, cq);
	printf("read after data: %s '%.*s'\n", res_name(cq[0].res), cq[0].res > 0 ? cq[0].res : 0, buf);
	char b1[2], b2[3];
	struct iovec rv[2] = { { b1, sizeof b1 }, { b2, sizeof b2 } };
	struct msghdr rm = { .msg_iov = rv, .msg_iovlen = 2 };
	if (write(c, "vwxyz", 5) != 5)
		die("write");
	x = entry(IORING_OP_RECVMSG, s, &rm, 0, MSG_WAITALL, 8);
	push(&x);
	reap(1, cq);
	printf("recvmsg: %s '%.2s' '%.3s'\n", res_name(cq[0].res), b1, b2);

	/* Polls: one that waits for bytes, one ready at once. */
	x = entry(IORING_OP_POLL_ADD, s, NULL, 0, 0, 9);
	x.poll32_events = POLLIN;
	push(&x);
	printf("poll before data: %s\n", pending() ? "pending" : "completed");
	if (write(c, "p", 1) != 1)
		die("write");
	reap(1, cq);
	printf("poll after data: %s\n", res_name(cq[0].res));
	if (read(s, buf, 1) != 1)
		die("read");
	x = entry(IORING_OP_POLL_ADD, s, NULL, 0, 0, 10);
	x.poll32_events = POLLOUT;
	printf("poll for room: %s\n", res_name(submit(&x)));

	/* A waiting receive cancelled; a waiting poll removed. */
	x = entry(IORING_OP_RECV, s, buf, sizeof buf, 0, 11);
	push(&x);
	x = entry(IORING_OP_ASYNC_CANCEL, -1, (void *)(uintptr_t)11, 0, 0, 12);
	push(&x);
	reap(2, cq);
	printf("cancel: recv %s,", res_name(cq[0].res));
	printf(" cancel %s\n", res_name(cq[1].res));
	x = entry(IORING_OP_POLL_ADD, s, NULL, 0, 0, 13);
	x.poll32_events = POLLIN;
	push(&x);
	x = entry(IORING_OP_POLL_REMOVE, -1, (void *)(uintptr_t)13, 0, 0, 14);
	push(&x);
	reap(2, cq);
	printf("poll remove: poll %s,", res_name(cq[0].res));
	printf(" remove %s\n", res_name(cq[1].res));
	if (write(c, "after", 5) != 5)
		die("write");
	read_all(s, buf, 5);
	printf("read after cancels '%.5s'\n", buf);

	/* Socket commands through the ring: the bytes waiting as the
	 * application counts them, and a receive timeout set through the ring
	 * after a blocking read has used the one set with setsockopt(). */
	if (write(c, "inq12", 5) != 5)
		die("write");
	wait_events(ep, 5000, "before siocinq");
	printf("siocinq through the ring: %s\n", res_name(sock_cmd(s, SOCK_CMD_SIOCINQ, 0, 0, NULL, 0)));
	read_all(s, buf, 5);
	printf("siocinq after reading: %s\n", res_name(sock_cmd(s, SOCK_CMD_SIOCINQ, 0, 0, NULL, 0)));
	struct timeval tv = { 0, 50 * 1000 };
	if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
		die("setsockopt");
	n = read(s, buf, sizeof buf);
	printf("read with a 50 ms timeout: %zd %s\n", n, n < 0 ? strerrorname_np(errno) : "");
	struct timeval none = { 0, 0 }, got = { 1, 1 };
	printf("setsockopt SO_RCVTIMEO 0 through the ring: %s\n",
	       res_name(sock_cmd(s, SOCK_CMD_SETSOCKOPT, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none)));
	int gr = sock_cmd(s, SOCK_CMD_GETSOCKOPT, SOL_SOCKET, SO_RCVTIMEO, &got, sizeof got);
	printf("getsockopt SO_RCVTIMEO through the ring: %s %ld.%06ld\n", res_name(gr), (long)got.tv_sec, (long)got.tv_usec);
	printf("getsockopt at another level: %s\n", res_name(sock_cmd(s, SOCK_CMD_GETSOCKOPT, IPPROTO_TCP, 1, &one, sizeof one)));
	pthread_t writer;
	if (pthread_create(&writer, NULL, late_write, &c) != 0)
		die("pthread_create");
	n = read(s, buf, sizeof buf);
	printf("read without a timeout: %zd '%.*s'\n", n, (int)(n > 0 ? n : 0), buf);
	pthread_join(writer, NULL);

	/* The server's side shut down through the ring: the client reads the end. */
	x = entry(IORING_OP_SHUTDOWN, s, NULL, SHUT_WR, 0, 15);
	printf("shutdown through the ring: %s\n", res_name(submit(&x)));
	printf("client read after shutdown %zd\n", read(c, buf, sizeof buf));

	/* A listener polled through the ring wakes for a client. */
	x = entry(IORING_OP_POLL_ADD, l, NULL, 0, 0, 16);
	x.poll32_events = POLLIN;
	push(&x);
	printf("listener poll before a client: %s\n", pending() ? "pending" : "completed");
	int c3 = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c3, (struct sockaddr *)&a, sizeof a) < 0)
		die("connect");
	reap(1, cq);
	printf("listener poll after a client: %s\n", res_name(cq[0].res));
	int s3 = accept(l, NULL, NULL);
	if (s3 < 0 || write(c3, "third", 5) != 5)
		die("accept");
	read_all(s3, buf, 5);
	printf("third connection '%.5s'\n", buf);
	close(c3);
	close(s3);

	/* The client closed through the ring: the server reads end of stream. */
	memset(&e, 0, sizeof e);
	e.opcode = IORING_OP_CLOSE;
	e.fd = c;
	printf("close through the ring: %s\n", res_name(submit(&e)));
	wait_events(ep, 5000, "after close");
	n = read(s, buf, sizeof buf);
	printf("read after close %zd\n", n);
	printf("end\n");
	return 0;
}
