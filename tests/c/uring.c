/* uring: what a program observes when it registers and uses connected and
 * listening sockets through io_uring (raw io_uring_setup/io_uring_enter via
 * syscall(2), as libuv does), printed line by line for TestURing, which
 * compares the lines plain and preloaded. Lines starting "recv-through-ring"
 * are compared by the test's own rule (an SDP connection's bytes cannot be
 * read past the engine: the same bytes, or an error, never other bytes).
 *
 *   uring PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
} ring;

static void die(const char *what)
{
	printf("error %s: %s\n", what, strerror(errno));
	exit(1);
}

static void ring_init(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
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
	ring.cq_head = (unsigned *)(cq + p.cq_off.head);
	ring.cq_tail = (unsigned *)(cq + p.cq_off.tail);
	ring.cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	ring.cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

/* submit runs one entry and returns its completion's result. */
static int submit(const struct io_uring_sqe *e)
{
	unsigned tail = *ring.sq_tail, idx = tail & *ring.sq_mask;
	ring.sqes[idx] = *e;
	ring.sq_array[idx] = idx;
	__atomic_store_n(ring.sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, ring.fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		die("io_uring_enter");
	unsigned head = *ring.cq_head;
	if (head == __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE))
		die("no completion");
	int res = ring.cqes[head & *ring.cq_mask].res;
	__atomic_store_n(ring.cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
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
	if (argc != 2) {
		fprintf(stderr, "usage: uring PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 8) < 0)
		die("listen");
	ring_init();
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
