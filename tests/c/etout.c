/* etout: edge-triggered EPOLLOUT on a connection whose other events stay
 * ready, for TestEdgeTriggeredOut.
 *
 *   etout server PORT N     accept one connection; register it edge
 *                           triggered for EPOLLIN, EPOLLOUT and EPOLLRDHUP;
 *                           read the client's stream to its end (which stays
 *                           readable from then on), then write N bytes,
 *                           each time until EAGAIN, and wait for EPOLLOUT
 *                           (2 s at most) before writing again
 *   etout client PORT N     send one byte, shut down the sending side, read
 *                           N bytes in small pieces as they come, then the
 *                           end of stream
 *
 * The client's reads give room back to the server (credit updates, ring
 * acknowledgements) while the server waits in epoll_wait: the wait must end
 * with EPOLLOUT, as over TCP, whichever thread of the engine took the
 * update off the socket. Prints "ok N" (client) or "served N ROUNDS"
 * (server); a failure prints why and exits 1. */
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

#include "et.h"

#define WAIT_MS 2000
#define CHUNK (64 << 10)

static int server(int port, uint64_t n)
{
	int ep, c = et_accept(port, &ep);
	/* The client's byte, then its end of stream. */
	char b;
	int eof = 0;
	while (!eof) {
		ssize_t k = read(c, &b, 1);
		if (k == 0) {
			eof = 1;
		} else if (k < 0 && errno == EAGAIN) {
			struct epoll_event got;
			if (epoll_wait(ep, &got, 1, WAIT_MS) <= 0)
				fail("epoll_wait for the client's end of stream");
		} else if (k < 0 && errno != EINTR) {
			fail("read");
		}
	}
	char *buf = calloc(1, CHUNK);
	if (!buf)
		fail("malloc");
	uint64_t sent = 0, rounds = 0;
	while (sent < n) {
		size_t w = n - sent < CHUNK ? (size_t)(n - sent) : CHUNK;
		ssize_t k = write(c, buf, w);
		if (k > 0) {
			sent += (uint64_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno != EAGAIN)
			fail("write");
		/* Full: the client's reads must bring EPOLLOUT. EPOLLIN and
		 * EPOLLRDHUP stay ready (end of stream) and were reported. */
		rounds++;
		for (;;) {
			struct epoll_event got;
			int r = epoll_wait(ep, &got, 1, WAIT_MS);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				fail("epoll_wait");
			if (r == 0) {
				printf("fail no EPOLLOUT within %d ms: sent %llu of %llu, round %llu\n", WAIT_MS,
				       (unsigned long long)sent, (unsigned long long)n, (unsigned long long)rounds);
				exit(1);
			}
			if (got.events & (EPOLLOUT | EPOLLERR))
				break;
		}
	}
	close(c);
	printf("served %llu %llu\n", (unsigned long long)sent, (unsigned long long)rounds);
	return 0;
}

static int client(int port, uint64_t n)
{
	int c = et_connect(port);
	if (write(c, "x", 1) != 1 || shutdown(c, SHUT_WR) < 0)
		fail("write and shutdown");
	static char in[4096];
	uint64_t got = 0;
	for (;;) {
		struct pollfd p = { .fd = c, .events = POLLIN };
		int r = poll(&p, 1, 2 * WAIT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			printf("fail no data: %llu of %llu\n", (unsigned long long)got, (unsigned long long)n);
			exit(1);
		}
		ssize_t k = read(c, in, sizeof in);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k < 0)
			fail("read");
		if (k == 0)
			break;
		got += (uint64_t)k;
	}
	if (got != n) {
		printf("fail end of stream after %llu of %llu\n", (unsigned long long)got, (unsigned long long)n);
		exit(1);
	}
	printf("ok %llu\n", (unsigned long long)got);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 4 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]), strtoull(argv[3], NULL, 10));
	if (argc >= 4 && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]), strtoull(argv[3], NULL, 10));
	fprintf(stderr, "usage: etout server PORT N | client PORT N\n");
	return 2;
}
