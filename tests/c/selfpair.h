/* selfpair.h: helpers for the test programs that play both ends of their
 * connections in one process (nested.c, follow.c, closeall.c, epollmany.c,
 * epollreadd.c, slack.c, epollrounds.c, oneshots.c). */
#ifndef SELFPAIR_H
#define SELFPAIR_H
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(c)                                                                            \
	do {                                                                                \
		if (!(c)) {                                                                 \
			fprintf(stderr, "%s:%d: %s failed (errno %d %s)\n", __FILE__, __LINE__, #c, \
				errno, strerror(errno));                                    \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

/* listener returns a socket listening on 127.0.0.1 and its address. */
static int listener(struct sockaddr_in *sa)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0);
	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	CHECK(inet_pton(AF_INET, "127.0.0.1", &sa->sin_addr) == 1);
	CHECK(bind(l, (struct sockaddr *)sa, sizeof *sa) == 0);
	CHECK(listen(l, 4) == 0);
	socklen_t sl = sizeof *sa;
	CHECK(getsockname(l, (struct sockaddr *)sa, &sl) == 0);
	return l;
}

/* pair connects to the listener l at sa and accepts: *s is the connecting
 * end, *c the accepted one. */
static void pair(int l, const struct sockaddr_in *sa, int *s, int *c)
{
	*s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(*s >= 0);
	CHECK(connect(*s, (const struct sockaddr *)sa, sizeof *sa) == 0);
	*c = accept(l, NULL, NULL);
	CHECK(*c >= 0);
}

/* read_n reads exactly n bytes. */
static void read_n(int fd, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		CHECK(r > 0);
		got += (size_t)r;
	}
}

/* pair_used is pair, then one byte each way: both ends' first I/O is done,
 * so the connection is SDP's and the engine is loaded. */
static inline void pair_used(int l, const struct sockaddr_in *sa, int *s, int *c)
{
	pair(l, sa, s, c);
	char b;
	CHECK(write(*s, "a", 1) == 1);
	read_n(*c, &b, 1);
	CHECK(write(*c, "b", 1) == 1);
	read_n(*s, &b, 1);
}

/* watch_readable adds fd to the epoll set ep for reading, with its own
 * number as data (what await_readable looks for). */
static inline void watch_readable(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
}

/* await_readable waits (bounded) until the epoll set ep reports fd, which
 * is registered with its own number as data, readable. */
static inline void await_readable(int ep, int fd)
{
	struct epoll_event ev[2];
	for (int i = 0; i < 100000; i++) {
		int n = epoll_wait(ep, ev, 2, 5000);
		CHECK(n > 0);
		for (int j = 0; j < n; j++)
			if (ev[j].data.fd == fd)
				return;
	}
	CHECK(!"readable");
}

#endif
