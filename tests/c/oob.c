/* oob.c: urgent data. send(MSG_OOB) makes the last byte urgent; the
 * receiver sees POLLPRI / EPOLLPRI, a read stops at the mark, SIOCATMARK
 * says when the reader is there, recv(MSG_OOB) reads the byte once (EINVAL
 * when there is none, it was read or SO_OOBINLINE is set), and without
 * SO_OOBINLINE the byte is left out of the stream, read or not; with it,
 * it stays in the stream. The expected results are Linux TCP's.
 *
 * Part "early": the client sends its urgent byte right after connect, before
 * anything came from the server, so between two preloaded processes on one
 * host while the accepting side is still choosing shared memory. */
#include "capi.h"
#include <sys/epoll.h>

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

/* recv_str reads once (blocking) and checks what came. */
#define RECV_STR(fd, flags, want)                                                           \
	do {                                                                                \
		char b_[64] = { 0 };                                                        \
		size_t w_ = strlen(want);                                                   \
		ssize_t n_ = recv((fd), b_, (flags) & MSG_WAITALL ? w_ : sizeof b_, (flags)); \
		if (n_ != (ssize_t)w_ || memcmp(b_, (want), w_))                            \
			FAIL("recv returned %zd \"%.*s\", want \"%s\"", n_, (int)(n_ > 0 ? n_ : 0), b_, (want)); \
	} while (0)

static void wait_pri(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLPRI };
	int n = poll(&p, 1, 10000);
	CHECK(n == 1 && (p.revents & POLLPRI), "POLLPRI within 10 s (poll returned %d, revents 0x%x)", n, p.revents);
}

/* server_early: "ab", "cd" with 'd' urgent and "ef", sent before the
 * connection carried anything else. */
static void server_early(struct ctx *c)
{
	int fd = ACCEPT(c->lfd[0]);
	char b;
	wait_pri(fd);
	RECV_STR(fd, 0, "abc"); /* stops at the mark */
	EQ(atmark(fd), 1);
	EQ(recv(fd, &b, 1, MSG_OOB), 1);
	EQ(b, 'd');
	RECV_STR(fd, MSG_WAITALL, "ef");
	EQ(atmark(fd), 0);
	SEND_TAG(fd, "end");
	EXPECT_EOF(fd);
	SYS(close(fd));
	SYS(close(c->lfd[0]));
}

static void server(struct ctx *c)
{
	if (!strcmp(c->part, "early")) {
		server_early(c);
		return;
	}
	int fd = ACCEPT(c->lfd[0]);
	char b;
	ERR(recv(fd, &b, 1, MSG_OOB), EINVAL); /* nothing urgent */
	EQ(atmark(fd), 0);
	SEND_TAG(fd, "s1");

	/* "ab", "cd" with 'd' urgent, "ef". */
	wait_pri(fd);
	EQ(atmark(fd), 0);
	RECV_STR(fd, 0, "abc"); /* stops at the mark */
	EQ(atmark(fd), 1);
	EQ(recv(fd, &b, 1, MSG_OOB | MSG_PEEK), 1);
	EQ(b, 'd');
	EQ(recv(fd, &b, 1, MSG_OOB), 1);
	EQ(b, 'd');
	ERR(recv(fd, &b, 1, MSG_OOB), EINVAL); /* read already */
	struct pollfd p = { .fd = fd, .events = POLLPRI };
	EQ(poll(&p, 1, 0), 0); /* no POLLPRI once read */
	EQ(atmark(fd), 1);      /* the mark stays until passed */
	RECV_STR(fd, MSG_WAITALL, "ef"); /* 'd' is not in the stream */
	EQ(atmark(fd), 0);
	SEND_TAG(fd, "s2");

	/* "gh" with 'h' urgent, never read: skipped. */
	wait_pri(fd);
	char g[3];
	EQ(recv(fd, g, sizeof g, MSG_WAITALL), 1); /* even MSG_WAITALL stops at the mark */
	EQ(g[0], 'g');
	EQ(atmark(fd), 1);
	RECV_STR(fd, MSG_WAITALL, "ij");
	ERR(recv(fd, &b, 1, MSG_OOB), EINVAL); /* passed */
	EQ(atmark(fd), 0);

	/* SO_OOBINLINE: "kl" with 'l' urgent stays in the stream; EPOLLPRI. */
	int on = 1;
	SYS(setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &on, sizeof on));
	int ep = SYS(epoll_create1(0));
	struct epoll_event ev = { .events = EPOLLPRI, .data.fd = fd };
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	SEND_TAG(fd, "s3");
	struct epoll_event out;
	int n = epoll_wait(ep, &out, 1, 10000);
	CHECK(n == 1 && (out.events & EPOLLPRI), "EPOLLPRI within 10 s (epoll_wait returned %d)", n);
	SYS(close(ep));
	ERR(recv(fd, &b, 1, MSG_OOB), EINVAL); /* SO_OOBINLINE */
	RECV_STR(fd, 0, "k");
	EQ(atmark(fd), 1);
	RECV_STR(fd, MSG_WAITALL, "lm");
	EQ(atmark(fd), 0);

	SEND_TAG(fd, "end");
	EXPECT_EOF(fd);
	SYS(close(fd));
	SYS(close(c->lfd[0]));
}

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	if (!strcmp(c->part, "early")) {
		EQ(send(fd, "ab", 2, 0), 2);
		EQ(send(fd, "cd", 2, MSG_OOB), 2);
		EQ(send(fd, "ef", 2, 0), 2);
		EXPECT_TAG(fd, "end");
		SYS(close(fd));
		return;
	}
	EXPECT_TAG(fd, "s1");
	EQ(send(fd, "ab", 2, 0), 2);
	EQ(send(fd, "cd", 2, MSG_OOB), 2);
	EQ(send(fd, "ef", 2, 0), 2);
	EXPECT_TAG(fd, "s2");
	EQ(send(fd, "gh", 2, MSG_OOB), 2);
	EQ(send(fd, "ij", 2, 0), 2);
	EXPECT_TAG(fd, "s3");
	EQ(send(fd, "kl", 2, MSG_OOB), 2);
	EQ(send(fd, "m", 1, 0), 1);
	EXPECT_TAG(fd, "end");
	SYS(close(fd));
}
