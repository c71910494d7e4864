/* nested.c: an epoll set holding an SDP socket, watched with poll() and from
 * inside another epoll set: its members' readiness lives in user space (bytes
 * left unread after a partial read), and both watchers must see it. */
#include "selfpair.h"
#include <poll.h>
#include <sys/epoll.h>

int main(void)
{
	alarm(20);
	struct sockaddr_in sa;
	int l = listener(&sa), s, c;
	pair(l, &sa, &s, &c);

	int inner = epoll_create1(0), outer = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = s };
	CHECK(epoll_ctl(inner, EPOLL_CTL_ADD, s, &ev) == 0);
	struct epoll_event ev2 = { .events = EPOLLIN, .data.fd = inner };
	CHECK(epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev2) == 0);

	struct pollfd p = { .fd = inner, .events = POLLIN };
	CHECK(poll(&p, 1, 50) == 0);
	CHECK(write(c, "0123456789", 10) == 10);
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN));
	char b[4];
	read_n(s, b, 4); /* 6 bytes stay in user space */
	CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLIN));

	struct epoll_event out[2];
	CHECK(epoll_wait(outer, out, 2, 1000) == 1 && out[0].data.fd == inner);
	CHECK(epoll_wait(inner, out, 2, 1000) == 1 && out[0].data.fd == s);
	char r[6];
	read_n(s, r, 6);
	CHECK(epoll_wait(inner, out, 2, 0) == 0);
	printf("nest ok\n");
	return 0;
}
