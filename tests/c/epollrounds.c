/* epollrounds.c: an event loop's request and answer, both ends in one
 * process and one epoll set (level-triggered), ROUNDS rounds of 16 bytes
 * each way. The test runs it under strace -c and counts the system calls
 * the engine makes per round: over shared memory a round needs the
 * doorbell each way and its drain, not a look at each socket before
 * every wait nor an eventfd for what the set's own look found (also after
 * an earlier set of both was closed). */
#define _GNU_SOURCE
#include "selfpair.h"

#define ROUNDS 2000

/* take reads the 16 bytes of a message. */
static void take(int fd, char *want)
{
	char b[64];
	ssize_t r = read(fd, b, sizeof b); /* one read, as an event loop makes */
	CHECK(r == 16);
	CHECK(memcmp(b, want, 16) == 0);
}

int main(void)
{
	alarm(60);
	struct sockaddr_in sa;
	int l = listener(&sa), s, c;
	pair_used(l, &sa, &s, &c);
	/* A set closed before takes its registrations with it: the rounds'
	 * set is then each connection's only one. */
	int old = epoll_create1(0);
	CHECK(old >= 0);
	watch_readable(old, s);
	watch_readable(old, c);
	CHECK(close(old) == 0);
	int ep = epoll_create1(0);
	CHECK(ep >= 0);
	watch_readable(ep, s);
	watch_readable(ep, c);
	char q[17] = "request 0000000", a[17] = "answer  0000000";
	for (int i = 0; i < ROUNDS; i++) {
		CHECK(write(s, q, 16) == 16);
		await_readable(ep, c);
		take(c, q);
		CHECK(write(c, a, 16) == 16);
		await_readable(ep, s);
		take(s, a);
	}
	printf("rounds ok: %d\n", ROUNDS);
	return 0;
}
