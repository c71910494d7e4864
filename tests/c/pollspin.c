/* pollspin.c: a poll or select wait on one connection over shared memory
 * polls the ring before it sleeps (shim/poll.c, SDP_POLL_SPIN), as a
 * blocking receive does. Two processes (forked before either touches a
 * socket): the child connects and answers every ping, on the connection or
 * through a pipe; the parent pings and waits for the answer in poll() or
 * select() on the connection and the pipe. Every wait must report exactly
 * what the answer moved, whether it came while the wait polled or while it
 * slept; a wait with a short timeout and nothing coming returns nothing
 * after the timeout. The parent prints its pid (the test reads its
 * statistics for the polls made). */
#include "selfpair.h"
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>

#define ROUNDS 2000

static int64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* wait_one waits for fd or pipe_r to be readable, with poll (r even) or
 * select (r odd), and returns the one reported (it must be exactly one). */
static int wait_one(int r, int fd, int pipe_r, int timeout_ms)
{
	if (r % 2 == 0) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = pipe_r, .events = POLLIN } };
		int n = poll(p, 2, timeout_ms);
		CHECK(n >= 0 && n <= 1);
		if (n == 0)
			return -1;
		CHECK((p[0].revents != 0) + (p[1].revents != 0) == 1);
		return p[0].revents ? fd : pipe_r;
	}
	fd_set rs;
	FD_ZERO(&rs);
	FD_SET(fd, &rs);
	FD_SET(pipe_r, &rs);
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	int n = select((fd > pipe_r ? fd : pipe_r) + 1, &rs, NULL, NULL, &tv);
	CHECK(n >= 0 && n <= 1);
	if (n == 0)
		return -1;
	return FD_ISSET(fd, &rs) ? fd : pipe_r;
}

int main(void)
{
	alarm(120);
	struct sockaddr_in sa;
	int l = listener(&sa);
	int pipefd[2];
	CHECK(pipe(pipefd) == 0);
	pid_t child = fork();
	CHECK(child >= 0);
	int one = 1;
	if (child == 0) {
		close(pipefd[0]);
		int s = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(s >= 0);
		CHECK(connect(s, (struct sockaddr *)&sa, sizeof sa) == 0);
		CHECK(setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
		for (int r = 0; r < ROUNDS; r++) {
			char c;
			read_n(s, &c, 1);
			CHECK(c == (char)r);
			/* Every third answer through the pipe. */
			CHECK(write(r % 3 == 2 ? pipefd[1] : s, &c, 1) == 1);
		}
		char c;
		CHECK(read(s, &c, 1) == 0); /* the parent's close */
		_exit(0);
	}
	close(pipefd[1]);
	int a = accept(l, NULL, NULL);
	CHECK(a >= 0);
	CHECK(setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
	for (int r = 0; r < ROUNDS; r++) {
		if (r % 100 == 1) {
			/* Nothing is coming: the wait lasts its timeout. */
			int64_t t0 = now_us();
			CHECK(wait_one(r, a, pipefd[0], 2) == -1);
			CHECK(now_us() - t0 >= 2000);
		}
		char c = (char)r, got;
		CHECK(write(a, &c, 1) == 1);
		int want = r % 3 == 2 ? pipefd[0] : a;
		CHECK(wait_one(r, a, pipefd[0], 10000) == want);
		read_n(want, &got, 1);
		CHECK(got == c);
	}
	CHECK(close(a) == 0);
	int st;
	CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("poller %d\n", (int)getpid());
	printf("spin ok\n");
	return 0;
}
