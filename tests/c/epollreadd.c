/* epollreadd.c: an event loop that deletes a connection from its epoll set
 * and adds it again as its interest comes and goes (redis-benchmark does at
 * every request): after a DEL nothing is reported and MOD or DEL fail with
 * ENOENT; after the ADD what is ready is reported, level- and
 * edge-triggered, with the data of the new registration; as over the
 * kernel's own epoll. */
#include "selfpair.h"
#include <sys/epoll.h>

#define ROUNDS 1000

static int add(int ep, int fd, uint32_t events, uint32_t tag)
{
	struct epoll_event ev = { .events = events, .data.u32 = tag };
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

int main(void)
{
	alarm(60);
	struct sockaddr_in sa;
	int l = listener(&sa);
	int cli, srv;
	pair(l, &sa, &cli, &srv);
	int ep = epoll_create1(0);
	CHECK(ep >= 0);
	struct epoll_event out[4], mod = { .events = EPOLLIN };
	char b;

	/* Deleted: not there for MOD or a second DEL, and silent. */
	CHECK(add(ep, srv, EPOLLIN, 1) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, srv, NULL) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, srv, NULL) == -1 && errno == ENOENT);
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, srv, &mod) == -1 && errno == ENOENT);
	CHECK(write(cli, "x", 1) == 1);
	CHECK(epoll_wait(ep, out, 4, 200) == 0);
	/* Added again: what waits is reported at once, with the new data. */
	CHECK(add(ep, srv, EPOLLIN, 2) == 0);
	CHECK(add(ep, srv, EPOLLIN, 3) == -1 && errno == EEXIST);
	CHECK(epoll_wait(ep, out, 4, 10000) == 1 && out[0].data.u32 == 2 && (out[0].events & EPOLLIN));
	read_n(srv, &b, 1);
	CHECK(b == 'x');
	CHECK(epoll_wait(ep, out, 4, 0) == 0);

	for (int r = 0; r < ROUNDS; r++) {
		uint32_t tag = 100 + (uint32_t)r;
		char c = (char)r;
		CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, srv, NULL) == 0);
		if (r % 2) {
			/* Arrives while deleted, then an edge-triggered ADD. */
			CHECK(write(cli, &c, 1) == 1);
			CHECK(add(ep, srv, EPOLLIN | EPOLLET, tag) == 0);
		} else {
			CHECK(add(ep, srv, EPOLLIN, tag) == 0);
			CHECK(epoll_wait(ep, out, 4, 0) == 0);
			CHECK(write(cli, &c, 1) == 1);
		}
		CHECK(epoll_wait(ep, out, 4, 10000) == 1 && out[0].data.u32 == tag && (out[0].events & EPOLLIN));
		read_n(srv, &b, 1);
		CHECK(b == c);
		CHECK(epoll_wait(ep, out, 4, 0) == 0);
	}
	/* Deleted for good, then closed: the set reports nothing. */
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, srv, NULL) == 0);
	CHECK(write(cli, "z", 1) == 1);
	CHECK(epoll_wait(ep, out, 4, 200) == 0);
	CHECK(close(srv) == 0);
	CHECK(epoll_wait(ep, out, 4, 0) == 0);
	printf("readd ok\n");
	return 0;
}
