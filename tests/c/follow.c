/* follow.c: an epoll registration made through one descriptor of an SDP
 * socket lives on when that descriptor is closed and a duplicate keeps the
 * socket open, as the kernel keeps it for the open file. */
#include "selfpair.h"
#include <sys/epoll.h>

int main(void)
{
	alarm(20);
	struct sockaddr_in sa;
	int l = listener(&sa), s, c;
	pair_used(l, &sa, &s, &c);

	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 777 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);
	int d = dup(s);
	CHECK(d >= 0);
	CHECK(close(s) == 0);

	CHECK(write(c, "zz", 2) == 2);
	struct epoll_event out[2];
	CHECK(epoll_wait(ep, out, 2, 3000) == 1 && out[0].data.u64 == 777);
	char r[2];
	read_n(d, r, 2);
	CHECK(epoll_wait(ep, out, 2, 50) == 0);
	printf("follow ok\n");
	return 0;
}
