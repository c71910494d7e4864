/* sockopt.c: TCP_NODELAY and TCP_CORK as the application sees them. One
 * connection; the server answers one-byte commands ('S': 64 bytes of the
 * pattern, 'C': close). Over SDP the transport keeps TCP_NODELAY on and is
 * never corked, so the values read back are the application's own, small
 * exchanges with Nagle's algorithm asked for still complete, a cork holds
 * the commands until it is cleared (or at most 200 ms), and clearing it
 * sends them at once. */
#include "capi.h"

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void server(struct ctx *c)
{
	int fd = ACCEPT(c->lfd[0]);
	SERVE_COMMANDS(fd, 64, 29);
	SYS(close(fd));
	SYS(close(c->lfd[0]));
}

static int opt(int fd, int name)
{
	int v = -1;
	socklen_t l = sizeof v;
	SYS(getsockopt(fd, IPPROTO_TCP, name, &v, &l));
	EQ(l, sizeof v);
	return v;
}

static void set(int fd, int name, int v)
{
	SYS(setsockopt(fd, IPPROTO_TCP, name, &v, sizeof v));
	EQ(opt(fd, name) != 0, v != 0);
}

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	uint8_t buf[64 * 3];
	uint64_t off = 0;
	EQ(opt(fd, TCP_NODELAY), 0);
	EQ(opt(fd, TCP_CORK), 0);
	set(fd, TCP_NODELAY, 1);
	set(fd, TCP_NODELAY, 0);
	/* A bad length is refused, and leaves the value alone. */
	char small = 1;
	ERR(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &small, 1), EINVAL);
	EQ(opt(fd, TCP_NODELAY), 0);

	/* Nagle on: a request-response exchange still goes on. */
	for (int i = 0; i < 200; i++) {
		WRITE_ALL(fd, "S", 1);
		READ_EXACT(fd, buf, 64);
		VERIFY(buf, 64, 29, off);
		off += 64;
	}

	/* Corked: three commands are held until the cork is cleared. */
	set(fd, TCP_CORK, 1);
	for (int i = 0; i < 3; i++)
		WRITE_ALL(fd, "S", 1);
	set(fd, TCP_CORK, 0);
	READ_EXACT(fd, buf, 3 * 64);
	VERIFY(buf, 3 * 64, 29, off);
	off += 3 * 64;

	/* Corked and never cleared: the held command still goes (Linux sends
	 * a corked tail after 200 ms). */
	set(fd, TCP_CORK, 1);
	WRITE_ALL(fd, "S", 1);
	READ_EXACT(fd, buf, 64);
	VERIFY(buf, 64, 29, off);
	off += 64;
	set(fd, TCP_CORK, 0);

	set(fd, TCP_NODELAY, 1);
	WRITE_ALL(fd, "C", 1);
	EXPECT_EOF(fd);
	SYS(close(fd));
}
