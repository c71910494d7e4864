/* epollmany.c: one epoll set holding many SDP connections, of which only a
 * few move: each wait must report exactly the connection that received,
 * level-triggered reports must repeat for bytes left unread, a lowered
 * SO_RCVLOWAT must make bytes already there ready, and (checked by
 * the test from the engine's statistics) the interposer must not ask the
 * engine about every connection at every wait. */
#include "selfpair.h"
#include <sys/epoll.h>

#define CONNS 64
#define ROUNDS 2000

int main(void)
{
	alarm(60);
	struct sockaddr_in sa;
	int l = listener(&sa);
	int cli[CONNS], srv[CONNS];
	for (int i = 0; i < CONNS; i++)
		pair(l, &sa, &cli[i], &srv[i]);
	int ep = epoll_create1(0);
	CHECK(ep >= 0);
	for (int i = 0; i < CONNS; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, srv[i], &ev) == 0);
	}
	struct epoll_event out[CONNS];
	CHECK(epoll_wait(ep, out, CONNS, 0) == 0);
	for (int r = 0; r < ROUNDS; r++) {
		int i = (r * 7) % 5; /* a few busy connections among many idle ones */
		char two[2] = { (char)r, (char)(r >> 8) };
		CHECK(write(cli[i], two, 2) == 2);
		int n = epoll_wait(ep, out, CONNS, 10000);
		CHECK(n == 1 && out[0].data.u32 == (uint32_t)i);
		char b;
		read_n(srv[i], &b, 1);
		CHECK(b == two[0]);
		/* One byte left unread: reported again, and alone. */
		n = epoll_wait(ep, out, CONNS, 10000);
		CHECK(n == 1 && out[0].data.u32 == (uint32_t)i);
		read_n(srv[i], &b, 1);
		CHECK(b == two[1]);
		CHECK(epoll_wait(ep, out, CONNS, 0) == 0);
	}
	/* SO_RCVLOWAT above what came: not ready; lowered to it: ready at
	 * once, though nothing arrived and the engine was not called. */
	int four = 4, one = 1;
	CHECK(setsockopt(srv[0], SOL_SOCKET, SO_RCVLOWAT, &four, sizeof four) == 0);
	CHECK(write(cli[0], "ab", 2) == 2);
	CHECK(epoll_wait(ep, out, CONNS, 200) == 0);
	CHECK(setsockopt(srv[0], SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one) == 0);
	CHECK(epoll_wait(ep, out, CONNS, 5000) == 1 && out[0].data.u32 == 0);
	char ab[2];
	read_n(srv[0], ab, 2);
	CHECK(ab[0] == 'a' && ab[1] == 'b');
	printf("many ok\n");
	return 0;
}
