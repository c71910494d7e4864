/* uring_lib: what a program observes when it uses connected sockets through
 * liburing (which enters the kernel with system call instructions of its
 * own, not libc's syscall()), printed line by line for TestLiburing, which
 * compares the lines plain and preloaded.
 *
 *   uring_lib PORT [sqpoll]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct io_uring ring;

static void die(const char *what, int err)
{
	printf("error %s: %s\n", what, strerror(err));
	exit(1);
}

static const char *res_name(int res)
{
	static char b[2][32];
	static int i;
	i ^= 1;
	if (res >= 0)
		snprintf(b[i], sizeof b[i], "%d", res);
	else
		snprintf(b[i], sizeof b[i], "-%s", strerrorname_np(-res) ? strerrorname_np(-res) : "?");
	return b[i];
}

static struct io_uring_sqe *sqe(uint64_t data)
{
	struct io_uring_sqe *e = io_uring_get_sqe(&ring);
	if (!e)
		die("io_uring_get_sqe", EBUSY);
	io_uring_sqe_set_data64(e, data);
	return e;
}

/* reap waits for n completions (after submitting what is queued) and
 * returns their results ordered by user_data (1, 2, ...: res[data - first]). */
static void reap(int n, uint64_t first, int *res)
{
	for (int i = 0; i < n; i++) {
		struct io_uring_cqe *c;
		int r = io_uring_submit_and_wait(&ring, 1);
		if (r < 0)
			die("io_uring_submit_and_wait", -r);
		r = io_uring_wait_cqe(&ring, &c);
		if (r < 0)
			die("io_uring_wait_cqe", -r);
		uint64_t d = io_uring_cqe_get_data64(c);
		if (d < first || d >= first + (uint64_t)n)
			die("unexpected completion", EPROTO);
		res[d - first] = c->res;
		io_uring_cqe_seen(&ring, c);
	}
}

static int one(void)
{
	int r;
	reap(1, 0, &r);
	return r;
}

/* pending says whether no completion has come yet (after submitting). */
static int pending(void)
{
	int r = io_uring_submit(&ring);
	if (r < 0)
		die("io_uring_submit", -r);
	struct io_uring_cqe *c;
	return io_uring_peek_cqe(&ring, &c) == -EAGAIN;
}

static void read_all(int fd, char *b, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, b + got, n - got);
		if (r <= 0)
			die("read_all", r < 0 ? errno : EPIPE);
		got += (size_t)r;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: uring_lib PORT [sqpoll]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	if (argc > 2 && !strcmp(argv[2], "sqpoll")) {
		p.flags = IORING_SETUP_SQPOLL;
		p.sq_thread_idle = 100;
	}
	int r = io_uring_queue_init_params(8, &ring, &p);
	if (r < 0)
		die("io_uring_queue_init_params", -r);

	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int l = socket(AF_INET, SOCK_STREAM, 0), on = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 8) < 0)
		die("listen", errno);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof a) < 0)
		die("connect", errno);
	int s = accept(l, NULL, NULL);
	if (s < 0)
		die("accept", errno);
	printf("accepted\n");

	/* A connection registered in an epoll set through the ring. */
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 7 };
	io_uring_prep_epoll_ctl(sqe(0), ep, s, EPOLL_CTL_ADD, &ev);
	printf("epoll_ctl through the ring: %s\n", res_name(one()));
	if (write(c, "hello", 5) != 5)
		die("write", errno);
	struct epoll_event got;
	printf("epoll_wait: %d\n", epoll_wait(ep, &got, 1, 5000));

	/* Bytes read and written through the ring. */
	char buf[64] = { 0 };
	io_uring_prep_recv(sqe(0), s, buf, sizeof buf, 0);
	r = one();
	printf("recv: %s '%.*s'\n", res_name(r), r > 0 ? r : 0, buf);
	io_uring_prep_recv(sqe(0), s, buf, sizeof buf, 0);
	printf("recv before data: %s\n", pending() ? "pending" : "completed");
	if (write(c, "late", 4) != 4)
		die("write", errno);
	r = one();
	printf("recv after data: %s '%.*s'\n", res_name(r), r > 0 ? r : 0, buf);
	io_uring_prep_send(sqe(0), s, "pong", 4, 0);
	printf("send: %s\n", res_name(one()));
	io_uring_prep_write(sqe(0), s, "abc", 3, 0);
	printf("write: %s\n", res_name(one()));
	read_all(c, buf, 7);
	printf("client read '%.7s'\n", buf);

	/* A poll that waits, a receive cancelled. */
	io_uring_prep_poll_add(sqe(0), s, POLLIN);
	printf("poll before data: %s\n", pending() ? "pending" : "completed");
	if (write(c, "p", 1) != 1)
		die("write", errno);
	printf("poll after data: %s\n", res_name(one()));
	read_all(s, buf, 1);
	int res[2];
	io_uring_prep_recv(sqe(1), s, buf, sizeof buf, 0);
	io_uring_prep_cancel64(sqe(2), 1, 0);
	reap(2, 1, res);
	printf("cancel: recv %s, cancel %s\n", res_name(res[0]), res_name(res[1]));

	/* A connection made through the ring (TCP's: the kernel connects to the address named). */
	int c4 = socket(AF_INET, SOCK_STREAM, 0);
	io_uring_prep_connect(sqe(0), c4, (struct sockaddr *)&a, sizeof a);
	printf("connect: %s\n", res_name(one()));
	int s4 = accept(l, NULL, NULL);
	if (s4 < 0 || write(c4, "four", 4) != 4)
		die("accept", errno);
	read_all(s4, buf, 4);
	printf("fourth connection '%.4s'\n", buf);
	close(c4);
	close(s4);

	/* Shut down and closed through the ring. */
	io_uring_prep_shutdown(sqe(0), s, SHUT_WR);
	printf("shutdown: %s\n", res_name(one()));
	printf("client read after shutdown %zd\n", read(c, buf, sizeof buf));
	io_uring_prep_close(sqe(0), c);
	printf("close: %s\n", res_name(one()));
	printf("read after close %zd\n", read(s, buf, sizeof buf));
	io_uring_queue_exit(&ring);
	printf("end\n");
	return 0;
}
