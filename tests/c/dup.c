/* dup.c: dup, dup2, dup3 and fcntl(F_DUPFD, F_DUPFD_CLOEXEC) of connected
 * sockets, before and after their first I/O; I/O on the duplicates and
 * close of the originals. The connection stays up until its last
 * descriptor is closed. One connection; the server echoes. */
#include "capi.h"

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void server(struct ctx *c)
{
	int a = ACCEPT(c->lfd[0]);
	/* Duplicate before any I/O and keep only the duplicate. */
	int b = SYS(dup(a));
	SYS(close(a));
	EQ(local_port(b), c->port[0]);
	uint8_t buf[4096];
	uint64_t total = 0;
	for (int i = 0; i < 100000; i++) {
		ssize_t r = read(b, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r >= 0, "read on the duplicate");
		if (r == 0)
			break;
		VERIFY(buf, (size_t)r, 61, total);
		WRITE_ALL(b, buf, (size_t)r);
		total += (uint64_t)r;
	}
	EQ(total, 6 * 1000);
	SYS(close(b));
	SYS(close(c->lfd[0]));
}

/* echo sends 1000 bytes on wfd and reads the echo on rfd. */
static uint64_t off;
#define ECHO(wfd, rfd)                                 \
	do {                                           \
		SEND_PAT((wfd), 1000, 61, off);        \
		RECV_PAT((rfd), 1000, 61, off);        \
		off += 1000;                           \
	} while (0)

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	/* dup before the first I/O */
	int d1 = SYS(dup(fd));
	CHECK(d1 != fd, "dup returns a new descriptor");
	EQ(peer_port(d1), c->port[0]);
	ECHO(d1, fd);
	/* fcntl duplicates after I/O */
	int d2 = SYS(fcntl(fd, F_DUPFD, 100));
	CHECK(d2 >= 100, "F_DUPFD 100 returned %d", d2);
	int d3 = SYS(fcntl(fd, F_DUPFD_CLOEXEC, 0));
	CHECK(SYS(fcntl(d3, F_GETFD)) & FD_CLOEXEC, "F_DUPFD_CLOEXEC sets FD_CLOEXEC");
	EQ(peer_port(d2), c->port[0]);
	ECHO(d2, d3);
	/* Closing the original leaves the connection up. */
	SYS(close(fd));
	ECHO(d3, d1);
	SYS(close(d1));
	ECHO(d2, d3);
	/* dup2 and dup3 onto chosen numbers */
	EQ(dup2(d2, 60), 60);
	EQ(dup3(d3, 61, O_CLOEXEC), 61);
	SYS(close(d2));
	SYS(close(d3));
	ECHO(60, 61);
	SYS(close(61));
	ECHO(60, 60);
	/* Closing the last descriptor ends the connection. */
	SYS(close(60));
}
