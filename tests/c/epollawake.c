/* epollawake.c: an epoll set of two SDP connections whose peers send while
 * the set's thread is awake, between two waits. Each wait must report the
 * connection that received, level-triggered and edge-triggered; and (checked
 * by the test from the engine's statistics) over shared memory those sends
 * ring no doorbell: the set takes back its looks' sleep announcements when
 * its wait returns, and looks at those connections at its next wait. */
#include "selfpair.h"

#define ROUNDS 1000

/* expect waits on ep and checks that fd alone is reported. */
static void expect(int ep, int fd)
{
	struct epoll_event out[4];
	int n = epoll_wait(ep, out, 4, 10000);
	CHECK(n == 1 && out[0].data.fd == fd);
}

int main(void)
{
	alarm(60);
	struct sockaddr_in sa;
	int l = listener(&sa);
	int a, ra, b, rb;
	pair_used(l, &sa, &a, &ra);
	pair_used(l, &sa, &b, &rb);
	for (int et = 0; et < 2; et++) {
		int ep = epoll_create1(0);
		CHECK(ep >= 0);
		int fds[2] = { ra, rb };
		for (int i = 0; i < 2; i++) {
			struct epoll_event ev = { .events = EPOLLIN | (et ? EPOLLET : 0), .data.fd = fds[i] };
			CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) == 0);
		}
		struct epoll_event out[4];
		CHECK(epoll_wait(ep, out, 4, 0) == 0);
		for (int r = 0; r < ROUNDS; r++) {
			char c = (char)r, got;
			CHECK(write(a, &c, 1) == 1);
			expect(ep, ra);
			/* This thread is awake: b's peer's byte needs no doorbell, and
			 * the next wait still finds it. */
			CHECK(write(b, &c, 1) == 1);
			read_n(ra, &got, 1);
			CHECK(got == c);
			expect(ep, rb);
			read_n(rb, &got, 1);
			CHECK(got == c);
		}
		CHECK(epoll_wait(ep, out, 4, 0) == 0);
		CHECK(close(ep) == 0);
	}
	printf("awake ok\n");
	return 0;
}
