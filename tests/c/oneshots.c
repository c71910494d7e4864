/* oneshots.c: CONNS connections of one request and one answer each, as
 * HTTP without keep-alive makes them, both ends in one process: the client
 * writes its request, the server reads it, answers and closes, the client
 * reads to the end and closes. The test runs it under strace -c and counts
 * the sends per connection: the connecting side's MPA Reply leaves with
 * its first data, and the accepting side sends no message of its own
 * before its answer. With ONESHOTS_EPOLL=1 in the environment both ends
 * are in an epoll set, as an event loop's are, and each read waits for it:
 * then the test counts the eventfd writes, of which a close makes none. */
#define _GNU_SOURCE
#include "selfpair.h"

#define CONNS 200
#define ANSWER 4096

int main(void)
{
	alarm(60);
	int ep = -1;
	const char *mode = getenv("ONESHOTS_EPOLL");
	if (mode && strcmp(mode, "1") == 0) {
		ep = epoll_create1(0);
		CHECK(ep >= 0);
	}
	struct sockaddr_in sa;
	int l = listener(&sa);
	static char answer[ANSWER], got[ANSWER + 1];
	memset(answer, 'a', sizeof answer);
	const char req[] = "GET /index.html HTTP/1.0\r\n\r\n";
	for (int i = 0; i < CONNS; i++) {
		int s, c;
		pair(l, &sa, &s, &c);
		if (ep >= 0) {
			watch_readable(ep, s);
			watch_readable(ep, c);
		}
		CHECK(write(s, req, sizeof req) == (ssize_t)sizeof req);
		char b[sizeof req];
		if (ep >= 0)
			await_readable(ep, c);
		read_n(c, b, sizeof b);
		CHECK(memcmp(b, req, sizeof req) == 0);
		CHECK(write(c, answer, sizeof answer) == (ssize_t)sizeof answer);
		CHECK(close(c) == 0);
		size_t n = 0;
		for (int k = 0; k < 10000; k++) {
			if (ep >= 0)
				await_readable(ep, s);
			ssize_t r = read(s, got + n, sizeof got - n);
			CHECK(r >= 0);
			if (r == 0)
				break;
			n += (size_t)r;
		}
		CHECK(n == sizeof answer && memcmp(got, answer, n) == 0);
		CHECK(close(s) == 0);
	}
	printf("oneshots ok: %d\n", CONNS);
	return 0;
}
