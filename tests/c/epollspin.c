/* epollspin.c: an event loop's wait over shared memory polls before it
 * sleeps (shim/epoll.c, epoll_spin). One thread waits in epoll_wait on a set
 * of an SDP connection and a pipe; another answers each of its pings, on
 * the connection or through the pipe, level-triggered and edge-triggered
 * rounds in turn. Every wait must report exactly what the answer moved,
 * whether it came while the wait polled or while it slept: a pipe's
 * readiness ends a poll, and a connection a poll watched is looked at again
 * before the set sleeps. A wait with a short timeout and nothing coming
 * returns 0 after the timeout, not before. (The test reads the engine's
 * statistics for the polls made.) */
#include "selfpair.h"
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <time.h>

#define ROUNDS 2000

static int a, pipefd[2];

static int64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* answerer: for each ping, the same octet back on the connection (even
 * rounds) or through the pipe (odd rounds). */
static void *answerer(void *arg)
{
	(void)arg;
	for (int r = 0; r < ROUNDS; r++) {
		char c;
		read_n(a, &c, 1);
		CHECK(c == (char)r);
		CHECK(write(r % 2 ? pipefd[1] : a, &c, 1) == 1);
	}
	return NULL;
}

int main(void)
{
	alarm(120);
	struct sockaddr_in sa;
	int l = listener(&sa);
	int ra;
	pair_used(l, &sa, &a, &ra);
	/* Over plain TCP, a ping answered through the pipe leaves its ACK
	 * delayed, and Nagle would hold the next ping for it. */
	int one = 1;
	CHECK(setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
	CHECK(setsockopt(ra, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
	CHECK(pipe(pipefd) == 0);
	int ep = epoll_create1(0);
	CHECK(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = ra };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ra, &ev) == 0);
	ev.data.fd = pipefd[0];
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev) == 0);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, answerer, NULL) == 0);
	for (int r = 0; r < ROUNDS; r++) {
		if (r % 500 == 250) {
			/* Edge-triggered from here to the next switch, and back. */
			ev.events = EPOLLIN | ((r / 500) % 2 ? 0 : EPOLLET);
			ev.data.fd = ra;
			CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, ra, &ev) == 0);
		}
		if (r % 100 == 0) {
			/* Nothing is coming: the wait lasts its timeout. */
			struct epoll_event out[4];
			int64_t t0 = now_us();
			CHECK(epoll_wait(ep, out, 4, 2) == 0);
			CHECK(now_us() - t0 >= 2000);
		}
		char c = (char)r, got;
		CHECK(write(ra, &c, 1) == 1);
		int want = r % 2 ? pipefd[0] : ra;
		struct epoll_event out[4];
		int n = epoll_wait(ep, out, 4, 10000);
		CHECK(n == 1 && out[0].data.fd == want);
		read_n(want, &got, 1);
		CHECK(got == c);
	}
	CHECK(pthread_join(th, NULL) == 0);
	struct epoll_event out[4];
	CHECK(epoll_wait(ep, out, 4, 0) == 0);
	printf("spin ok\n");
	return 0;
}
