/* ioctl.c: ioctl FIONREAD (bytes ready to read) and FIONBIO (non-blocking
 * mode) on connected sockets. One connection. The server answers one-byte
 * commands: 'S' sends 1000 bytes in one write, 'C' closes. */
#include "capi.h"
#include <sys/ioctl.h>

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void server(struct ctx *c)
{
	int fd = ACCEPT(c->lfd[0]);
	SERVE_COMMANDS(fd, 1000, 71);
	SYS(close(fd));
	SYS(close(c->lfd[0]));
}

static int nread(int fd)
{
	int n = -1;
	SYS(ioctl(fd, FIONREAD, &n));
	return n;
}

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	uint8_t buf[1000];
	uint64_t off = 0;
	EQ(nread(fd), 0);

	WRITE_ALL(fd, "S", 1);
	CHECK(wait_fd(fd, POLLIN, 5000) & POLLIN, "the socket becomes readable");
	EQ(nread(fd), 1000);
	READ_EXACT(fd, buf, 300);
	VERIFY(buf, 300, 71, off);
	off += 300;
	EQ(nread(fd), 700);
	READ_EXACT(fd, buf, 700);
	VERIFY(buf, 700, 71, off);
	off += 700;
	EQ(nread(fd), 0);

	/* FIONBIO on: reads fail with EAGAIN, F_GETFL shows O_NONBLOCK. */
	int on = 1;
	SYS(ioctl(fd, FIONBIO, &on));
	CHECK(SYS(fcntl(fd, F_GETFL)) & O_NONBLOCK, "FIONBIO sets O_NONBLOCK");
	ERR(recv(fd, buf, sizeof buf, 0), EAGAIN);
	ERR(read(fd, buf, sizeof buf), EAGAIN);
	/* FIONBIO off: a read blocks until data comes. */
	on = 0;
	SYS(ioctl(fd, FIONBIO, &on));
	CHECK(!(SYS(fcntl(fd, F_GETFL)) & O_NONBLOCK), "FIONBIO 0 clears O_NONBLOCK");
	WRITE_ALL(fd, "S", 1);
	READ_EXACT(fd, buf, 1000);
	VERIFY(buf, 1000, 71, off);
	WRITE_ALL(fd, "C", 1);
	EXPECT_EOF(fd);
	EQ(nread(fd), 0);
	SYS(close(fd));
}
