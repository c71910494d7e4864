/* et.h: what etecho.c and etout.c share: the failure exit, the loopback
 * connection they test (one accepted connection registered edge triggered
 * for EPOLLIN, EPOLLOUT and EPOLLRDHUP in an epoll set; the client's
 * blocking connect) and O_NONBLOCK. */
#ifndef LIBSDP_TESTS_ET_H
#define LIBSDP_TESTS_ET_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

static void fail(const char *what)
{
	printf("fail %s: %s\n", what, strerror(errno));
	exit(1);
}

static void nonblock(int fd)
{
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		fail("fcntl");
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	return a;
}

/* et_accept listens on 127.0.0.1:port, says "listening", accepts one
 * connection, makes it non-blocking and registers it in a new epoll set
 * (*ep), edge triggered. */
static int et_accept(int port, int *ep)
{
	struct sockaddr_in a = loopback(port);
	int l = socket(AF_INET, SOCK_STREAM, 0), on = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4) < 0)
		fail("listen");
	printf("listening\n");
	fflush(stdout);
	int c = accept(l, NULL, NULL);
	if (c < 0)
		fail("accept");
	nonblock(c);
	*ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = c };
	if (*ep < 0 || epoll_ctl(*ep, EPOLL_CTL_ADD, c, &ev) < 0)
		fail("epoll");
	return c;
}

/* et_connect connects a blocking socket to 127.0.0.1:port. */
static int et_connect(int port)
{
	struct sockaddr_in a = loopback(port);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof a) < 0)
		fail("connect");
	return c;
}

#endif
