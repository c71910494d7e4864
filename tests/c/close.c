/* close.c: shutdown and close.
 *
 * PART "-": shutdown(SHUT_WR) → the peer reads end of stream while the other
 * direction still works; close right after writing → the peer gets every
 * byte, then end of stream. Two connections.
 * PART "epipe": writing to a peer that closed (after reading its end of
 * stream) → EPIPE, with SIGPIPE unless MSG_NOSIGNAL. One connection. */
#include "capi.h"

#define TAIL (4u << 20)

static volatile sig_atomic_t sigpipes;
static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

/* write_until_epipe writes to a socket whose peer has closed until the
 * write fails; it must fail with EPIPE. flags go to send(); with use_write
 * write() is used instead. */
static void write_until_epipe(int fd, int flags, int use_write)
{
	for (int i = 0; i < 100; i++) {
		errno = 0;
		ssize_t w = use_write ? write(fd, "z", 1) : send(fd, "z", 1, flags);
		if (w < 0) {
			CHECK(errno == EPIPE, "writing to a closed peer fails with EPIPE (attempt %d)", i);
			return;
		}
		/* The peer's reset is on its way: wait for it, bounded. */
		wait_fd(fd, POLLERR | POLLHUP, 100);
	}
	FAIL("100 writes to a peer that closed all succeeded");
}

static void server(struct ctx *c)
{
	int lfd = c->lfd[0];
	uint8_t buf[5000];
	if (!strcmp(c->part, "epipe"))
		goto epipe;

	/* 1. The client shuts down its sending side after 1000 bytes. */
	int a = ACCEPT(lfd);
	RECV_PAT(a, 1000, 41, 0);
	EXPECT_EOF(a);
	EXPECT_EOF(a);
	/* Our direction still works. */
	SEND_PAT(a, 5000, 42, 0);
	SYS(close(a));

	/* 2. We write 4 MiB and close at once; the client reads it all. */
	int b = ACCEPT(lfd);
	EXPECT_TAG(b, "ready");
	SEND_PAT(b, TAIL, 43, 0);
	SYS(close(b));
	SYS(close(lfd));
	return;

epipe:;
	/* 3. The client closes; we read end of stream, then write. */
	int d = ACCEPT(lfd);
	SEND_TAG(d, "hello");
	EXPECT_EOF(d);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigpipe;
	SYS(sigaction(SIGPIPE, &sa, NULL));
	write_until_epipe(d, MSG_NOSIGNAL, 0);
	EQ(sigpipes, 0);
	/* Without MSG_NOSIGNAL the same error raises SIGPIPE. */
	errno = 0;
	ERR(send(d, buf, 10, 0), EPIPE);
	EQ(sigpipes, 1);
	ERR(write(d, buf, 10), EPIPE);
	EQ(sigpipes, 2);
	ERR(send(d, buf, 10, MSG_NOSIGNAL), EPIPE);
	EQ(sigpipes, 2);
	SYS(close(d));
	SYS(close(lfd));
}

static void client(struct ctx *c)
{
	int port = c->port[0];
	if (!strcmp(c->part, "epipe"))
		goto epipe;

	/* 1. */
	int a = connect4(port);
	SEND_PAT(a, 1000, 41, 0);
	SYS(shutdown(a, SHUT_WR));
	ERR(send(a, "x", 1, MSG_NOSIGNAL), EPIPE);
	RECV_PAT(a, 5000, 42, 0);
	EXPECT_EOF(a);
	SYS(close(a));

	/* 2. */
	int b = connect4(port);
	SEND_TAG(b, "ready");
	RECV_PAT(b, TAIL, 43, 0);
	EXPECT_EOF(b);
	EXPECT_EOF(b);
	SYS(close(b));
	return;

epipe:;
	/* 3. */
	int d = connect4(port);
	EXPECT_TAG(d, "hello");
	SYS(close(d));
}
