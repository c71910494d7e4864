/* epoll.c: epoll_create1/epoll_ctl/epoll_wait with sockets and a pipe in
 * one epoll instance: level and edge triggered, EPOLLONESHOT,
 * EPOLL_CTL_MOD/DEL, EPOLLOUT, EPOLLRDHUP, a listener in epoll. One
 * connection. The server answers one-byte commands: 'S' sends 100 bytes,
 * 'W' shuts down its sending side. */
#include "capi.h"
#include <sys/epoll.h>

#define QUIET 100 /* ms to wait for an event that must not come */
#define SOCK 1
#define PIPE 2

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void server(struct ctx *c)
{
	int lfd = c->lfd[0];
	int ep = SYS(epoll_create1(EPOLL_CLOEXEC));
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev));
	struct epoll_event out[4];
	int n = SYS(epoll_wait(ep, out, 4, 10000));
	EQ(n, 1);
	EQ(out[0].data.fd, lfd);
	CHECK(out[0].events & EPOLLIN, "the listener is readable (events 0x%x)", out[0].events);
	int fd = ACCEPT(lfd);
	SYS(epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL));
	ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = fd };
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	uint8_t buf[100];
	uint64_t off = 0;
	for (;;) {
		n = SYS(epoll_wait(ep, out, 4, 10000));
		CHECK(n == 1 && out[0].data.fd == fd, "a command within 10 s (%d events)", n);
		char cmd;
		READ_EXACT(fd, &cmd, 1);
		if (cmd == 'S') {
			fill(buf, sizeof buf, 51, off);
			WRITE_ALL(fd, buf, sizeof buf);
			off += sizeof buf;
		} else if (cmd == 'W') {
			SYS(shutdown(fd, SHUT_WR));
		} else if (cmd == 'C') {
			break;
		} else {
			FAIL("unknown command %d", cmd);
		}
	}
	SYS(close(fd));
	SYS(close(ep));
	SYS(close(lfd));
}

/* expect_events waits up to ms and checks which of SOCK and PIPE reported,
 * returning the socket's events. */
#define EXPECT_EVENTS(ep, want, ms) expect_events(__LINE__, ep, want, ms)
static uint32_t expect_events(int line, int ep, int want, int ms)
{
	struct epoll_event out[4];
	int n;
	do {
		n = epoll_wait(ep, out, 4, ms);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		failf(__FILE__, line, errno, "epoll_wait");
	int got = 0;
	uint32_t sev = 0;
	for (int i = 0; i < n; i++) {
		got |= (int)out[i].data.u64;
		if (out[i].data.u64 == SOCK)
			sev = out[i].events;
	}
	if (got != want)
		failf(__FILE__, line, 0, "epoll_wait reported %s%s%s (%d events), want %s%s%s",
		      got & SOCK ? "socket " : "", got & PIPE ? "pipe " : "", got ? "" : "nothing", n,
		      want & SOCK ? "socket " : "", want & PIPE ? "pipe " : "", want ? "" : "nothing");
	return sev;
}

static void set_events(int ep, int op, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u64 = SOCK };
	SYS(epoll_ctl(ep, op, fd, &ev));
}

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	int pfd[2];
	SYS(pipe(pfd));
	int ep = SYS(epoll_create1(0));
	set_events(ep, EPOLL_CTL_ADD, fd, EPOLLIN);
	struct epoll_event pev = { .events = EPOLLIN, .data.u64 = PIPE };
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &pev));
	ERR(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &pev), EEXIST);
	uint8_t buf[200];
	uint64_t off = 0;

	/* Nothing ready: the timeout is honoured. */
	int64_t t0 = now_ms();
	EXPECT_EVENTS(ep, 0, QUIET);
	CHECK(now_ms() - t0 >= QUIET - 1, "epoll_wait returned after %lld ms", (long long)(now_ms() - t0));

	/* The pipe alone. */
	SYS(write(pfd[1], "x", 1));
	EXPECT_EVENTS(ep, PIPE, 5000);
	char x;
	SYS(read(pfd[0], &x, 1));

	/* Level triggered: reported while data is unread. */
	WRITE_ALL(fd, "S", 1);
	uint32_t e = EXPECT_EVENTS(ep, SOCK, 5000);
	CHECK(e & EPOLLIN, "EPOLLIN (events 0x%x)", e);
	READ_EXACT(fd, buf, 50);
	VERIFY(buf, 50, 51, off);
	off += 50;
	EXPECT_EVENTS(ep, SOCK, 0);
	EXPECT_EVENTS(ep, SOCK, 0);
	READ_EXACT(fd, buf, 50);
	VERIFY(buf, 50, 51, off);
	off += 50;
	EXPECT_EVENTS(ep, 0, 0);

	/* Socket and pipe together. */
	WRITE_ALL(fd, "S", 1);
	SYS(write(pfd[1], "x", 1));
	CHECK(wait_fd(fd, POLLIN, 5000) & POLLIN, "the socket becomes readable");
	EXPECT_EVENTS(ep, SOCK | PIPE, 5000);
	READ_EXACT(fd, buf, 100);
	VERIFY(buf, 100, 51, off);
	off += 100;
	SYS(read(pfd[0], &x, 1));

	/* Edge triggered: one report per arrival, none for data left unread. */
	set_nonblock(fd, 1);
	set_events(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLET);
	WRITE_ALL(fd, "S", 1);
	EXPECT_EVENTS(ep, SOCK, 5000);
	ssize_t r = SYS(read(fd, buf, 30));
	EQ(r, 30);
	VERIFY(buf, 30, 51, off);
	off += 30;
	EXPECT_EVENTS(ep, 0, QUIET);
	WRITE_ALL(fd, "S", 1);
	EXPECT_EVENTS(ep, SOCK, 5000);
	/* Read everything (170 bytes), until EAGAIN. */
	size_t got = 0;
	for (int i = 0; i < 1000; i++) {
		r = read(fd, buf + got, sizeof buf - got);
		if (r < 0 && errno == EAGAIN) {
			if (got == 170)
				break;
			CHECK(wait_fd(fd, POLLIN, 5000) & POLLIN, "the rest of the data arrives");
			continue;
		}
		CHECK(r > 0, "read returned %zd", r);
		got += (size_t)r;
	}
	EQ(got, 170);
	VERIFY(buf, 170, 51, off);
	off += 170;
	EXPECT_EVENTS(ep, 0, 0);
	set_nonblock(fd, 0);

	/* EPOLLONESHOT: one report, then nothing until re-armed with MOD. */
	set_events(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT);
	WRITE_ALL(fd, "S", 1);
	EXPECT_EVENTS(ep, SOCK, 5000);
	EXPECT_EVENTS(ep, 0, QUIET);
	set_events(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT);
	EXPECT_EVENTS(ep, SOCK, 5000);
	READ_EXACT(fd, buf, 100);
	VERIFY(buf, 100, 51, off);
	off += 100;

	/* EPOLLOUT: a connected socket is writable. */
	set_events(ep, EPOLL_CTL_MOD, fd, EPOLLOUT);
	e = EXPECT_EVENTS(ep, SOCK, 5000);
	CHECK(e & EPOLLOUT, "EPOLLOUT (events 0x%x)", e);

	/* DEL: no more reports for the socket. */
	SYS(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL));
	ERR(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL), ENOENT);
	WRITE_ALL(fd, "S", 1);
	CHECK(wait_fd(fd, POLLIN, 5000) & POLLIN, "the socket becomes readable");
	EXPECT_EVENTS(ep, 0, QUIET);
	READ_EXACT(fd, buf, 100);
	VERIFY(buf, 100, 51, off);
	off += 100;

	/* EPOLLRDHUP: the server shuts down its sending side. */
	set_events(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP);
	WRITE_ALL(fd, "W", 1);
	e = EXPECT_EVENTS(ep, SOCK, 5000);
	CHECK(e & EPOLLIN, "end of stream is EPOLLIN (events 0x%x)", e);
	CHECK(e & EPOLLRDHUP, "end of stream is EPOLLRDHUP (events 0x%x)", e);
	EXPECT_EOF(fd);
	WRITE_ALL(fd, "C", 1);
	SYS(close(ep));
	SYS(close(fd));
	close(pfd[0]);
	close(pfd[1]);
}
