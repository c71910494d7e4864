/* etecho: an edge-triggered epoll echo server and a poll-driven client,
 * for TestEchoAtExit.
 *
 *   etecho server PORT SEED   echo one connection: non-blocking, edge
 *                             triggered, writes of random sizes (1 B to
 *                             1 MiB); at the client's end of stream, write
 *                             what is left, close and exit at once
 *                             (ETECHO_OPEN=1: exit without closing;
 *                             ETECHO_EXIT=1: exit() instead of _exit)
 *   etecho client PORT SEED N stream N bytes (random write sizes), read the
 *                             echo as it comes, shut down the sending side,
 *                             read to end of stream; check every byte
 *
 * Prints "ok N" (client) or "served N" (server); any failure prints why and
 * exits 1. Every wait is bounded (20 s without progress). */
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

#include "et.h"

#define STALL_MS 20000
#define MAXW (1 << 20)

static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

static int server(int port, uint32_t seed)
{
	int ep, c = et_accept(port, &ep);
	size_t cap = 16 << 20, have = 0, off = 0;
	char *buf = malloc(cap);
	uint64_t total = 0;
	int eof = 0;
	if (!buf)
		fail("malloc");
	for (;;) {
		/* Edge triggered: read until EAGAIN, write until EAGAIN. */
		while (!eof) {
			if (have == cap) {
				memmove(buf, buf + off, have - off);
				have -= off, off = 0;
				if (have == cap)
					break; /* full: write first */
			}
			ssize_t n = read(c, buf + have, cap - have);
			if (n > 0) {
				have += (size_t)n, total += (uint64_t)n;
			} else if (n == 0) {
				eof = 1;
			} else if (errno == EAGAIN) {
				break;
			} else if (errno != EINTR) {
				fail("read");
			}
		}
		while (off < have) {
			size_t w = 1 + rnd(&seed) % MAXW;
			if (w > have - off)
				w = have - off;
			ssize_t n = write(c, buf + off, w);
			if (n > 0)
				off += (size_t)n;
			else if (n < 0 && errno == EAGAIN)
				break;
			else if (n < 0 && errno != EINTR)
				fail("write");
		}
		if (off == have)
			off = have = 0;
		if (eof && !have)
			break;
		struct epoll_event got;
		int r = epoll_wait(ep, &got, 1, STALL_MS);
		if (r == 0) {
			errno = ETIMEDOUT;
			fail("epoll_wait: no progress");
		}
		if (r < 0 && errno != EINTR)
			fail("epoll_wait");
	}
	/* All written: close and leave at once, as the finding's server did;
	 * with ETECHO_OPEN, leave with the connection still open, as a process
	 * whose last act is _exit does: the kernel closes it. */
	if (!getenv("ETECHO_OPEN"))
		close(c);
	printf("served %llu\n", (unsigned long long)total);
	fflush(stdout);
	if (getenv("ETECHO_EXIT"))
		exit(0);
	_exit(0);
}

static int client(int port, uint32_t seed, uint64_t n)
{
	int c = et_connect(port);
	nonblock(c);
	char *out = malloc(MAXW), *in = malloc(1 << 20);
	if (!out || !in)
		fail("malloc");
	uint64_t sent = 0, got = 0;
	int shut = 0;
	for (;;) {
		struct pollfd p = { .fd = c, .events = POLLIN | (sent < n ? POLLOUT : 0) };
		int r = poll(&p, 1, STALL_MS);
		if (r == 0) {
			printf("fail no progress: sent %llu of %llu, echo %llu\n", (unsigned long long)sent,
			       (unsigned long long)n, (unsigned long long)got);
			exit(1);
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			fail("poll");
		}
		if (p.revents & POLLOUT && sent < n) {
			size_t w = 1 + rnd(&seed) % MAXW;
			if (w > n - sent)
				w = (size_t)(n - sent);
			for (size_t i = 0; i < w; i++)
				out[i] = (char)pattern(sent + i);
			ssize_t k = write(c, out, w);
			if (k > 0)
				sent += (uint64_t)k;
			else if (k < 0 && errno != EAGAIN && errno != EINTR)
				fail("write");
		}
		if (sent == n && !shut) {
			if (shutdown(c, SHUT_WR) < 0)
				fail("shutdown");
			shut = 1;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t k = read(c, in, 1 << 20);
			if (k < 0 && errno != EAGAIN && errno != EINTR) {
				printf("fail read after %llu of %llu echoed: %s\n", (unsigned long long)got,
				       (unsigned long long)n, strerror(errno));
				exit(1);
			}
			if (k == 0) {
				if (got != n) {
					printf("fail end of stream after %llu of %llu echoed\n", (unsigned long long)got,
					       (unsigned long long)n);
					exit(1);
				}
				printf("ok %llu\n", (unsigned long long)got);
				return 0;
			}
			for (ssize_t i = 0; i < k; i++)
				if ((uint8_t)in[i] != pattern(got + (uint64_t)i)) {
					printf("fail byte %llu differs\n", (unsigned long long)(got + (uint64_t)i));
					exit(1);
				}
			if (k > 0)
				got += (uint64_t)k;
		}
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 4 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]), (uint32_t)strtoul(argv[3], NULL, 10) | 1);
	if (argc >= 5 && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]), (uint32_t)strtoul(argv[3], NULL, 10) | 1, strtoull(argv[4], NULL, 10));
	fprintf(stderr, "usage: etecho server PORT SEED | client PORT SEED BYTES\n");
	return 2;
}
