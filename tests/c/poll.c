/* poll.c: poll, ppoll, select and pselect with a socket and a pipe in the
 * same call; timeouts are honoured; data partly read is still readable;
 * end of stream is readable. One connection. The server answers one-byte
 * commands: 'S' sends 100 bytes, 'C' closes. */
#include "capi.h"
#include <sys/select.h>

#define TMO 100 /* ms */

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
	/* Nothing to accept yet: poll and select time out. */
	struct pollfd p = { .fd = c->lfd[0], .events = POLLIN };
	int64_t t0 = now_ms();
	EQ(poll(&p, 1, TMO), 0);
	CHECK(now_ms() - t0 >= TMO - 1, "poll returned after %lld ms, before its timeout", (long long)(now_ms() - t0));
}

static void server(struct ctx *c)
{
	int lfd = c->lfd[0];
	int pfd[2];
	SYS(pipe(pfd));
	/* select on the listener and a pipe: only the listener becomes ready. */
	fd_set r;
	FD_ZERO(&r);
	FD_SET(lfd, &r);
	FD_SET(pfd[0], &r);
	struct timeval tv = { .tv_sec = 10 };
	int n = SYS(select((lfd > pfd[0] ? lfd : pfd[0]) + 1, &r, NULL, NULL, &tv));
	EQ(n, 1);
	CHECK(FD_ISSET(lfd, &r), "the listener is readable");
	CHECK(!FD_ISSET(pfd[0], &r), "the empty pipe is not readable");
	int fd = ACCEPT(lfd);
	SERVE_COMMANDS(fd, 100, 31);
	SYS(close(fd));
	SYS(close(lfd));
	close(pfd[0]);
	close(pfd[1]);
}

static int64_t t_start;
static void tick(void) { t_start = now_ms(); }
static void timed_out(const char *what, int rc, int tmo)
{
	int64_t el = now_ms() - t_start;
	CHECK(rc == 0, "%s with nothing ready returns 0 (returned %d)", what, rc);
	CHECK(el >= tmo - 1, "%s returned after %lld ms, before its %d ms timeout", what, (long long)el, tmo);
	CHECK(el < tmo + 2000, "%s returned after %lld ms, long after its %d ms timeout", what, (long long)el, tmo);
}

static int maxfd(int a, int b) { return (a > b ? a : b) + 1; }

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	int pfd[2];
	SYS(pipe(pfd));
	int nf = maxfd(fd, pfd[0]);
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = pfd[0], .events = POLLIN } };
	fd_set r, w;
	struct timeval tv;
	struct timespec ts;
	sigset_t mask;
	sigemptyset(&mask);

	/* 1. Nothing ready: every call honours its timeout. */
	tick();
	timed_out("poll", poll(p, 2, TMO), TMO);
	ts = (struct timespec){ .tv_nsec = TMO * 1000000L };
	tick();
	timed_out("ppoll", ppoll(p, 2, &ts, &mask), TMO);
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_SET(pfd[0], &r);
	tv = (struct timeval){ .tv_usec = TMO * 1000 };
	tick();
	timed_out("select", select(nf, &r, NULL, NULL, &tv), TMO);
	CHECK(!FD_ISSET(fd, &r) && !FD_ISSET(pfd[0], &r), "select clears the sets on timeout");
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_SET(pfd[0], &r);
	tick();
	timed_out("pselect", pselect(nf, &r, NULL, NULL, &ts, &mask), TMO);

	/* 2. The socket is writable at once. */
	struct pollfd pw = { .fd = fd, .events = POLLOUT };
	EQ(poll(&pw, 1, 1000), 1);
	CHECK(pw.revents & POLLOUT, "a connected socket is writable (revents 0x%x)", pw.revents);
	FD_ZERO(&w);
	FD_SET(fd, &w);
	tv = (struct timeval){ .tv_sec = 1 };
	EQ(select(nf, NULL, &w, NULL, &tv), 1);
	CHECK(FD_ISSET(fd, &w), "select: the socket is writable");

	/* 3. Only the pipe is readable. */
	SYS(write(pfd[1], "x", 1));
	EQ(poll(p, 2, 5000), 1);
	CHECK(p[1].revents & POLLIN, "the pipe is readable (revents 0x%x)", p[1].revents);
	EQ(p[0].revents, 0);
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_SET(pfd[0], &r);
	tv = (struct timeval){ .tv_sec = 5 };
	EQ(select(nf, &r, NULL, NULL, &tv), 1);
	CHECK(FD_ISSET(pfd[0], &r) && !FD_ISSET(fd, &r), "select: only the pipe is readable");
	char x;
	SYS(read(pfd[0], &x, 1));

	/* 4. Only the socket is readable, also while part of the data is unread. */
	uint8_t buf[100];
	uint64_t off = 0;
	WRITE_ALL(fd, "S", 1);
	int64_t t0 = now_ms();
	EQ(poll(p, 2, 5000), 1);
	CHECK(now_ms() - t0 < 4000, "poll returned when data arrived, not at its timeout");
	CHECK(p[0].revents & POLLIN, "the socket is readable (revents 0x%x)", p[0].revents);
	EQ(p[1].revents, 0);
	READ_EXACT(fd, buf, 40);
	VERIFY(buf, 40, 31, off);
	off += 40;
	EQ(poll(p, 2, 0), 1);
	CHECK(p[0].revents & POLLIN, "still readable with 60 bytes unread (revents 0x%x)", p[0].revents);
	ts = (struct timespec){ .tv_sec = 5 };
	EQ(ppoll(p, 2, &ts, &mask), 1);
	CHECK(p[0].revents & POLLIN, "ppoll: still readable (revents 0x%x)", p[0].revents);
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_SET(pfd[0], &r);
	tv = (struct timeval){ .tv_sec = 5 };
	EQ(select(nf, &r, NULL, NULL, &tv), 1);
	CHECK(FD_ISSET(fd, &r) && !FD_ISSET(pfd[0], &r), "select: only the socket is readable");
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_SET(pfd[0], &r);
	EQ(pselect(nf, &r, NULL, NULL, &ts, &mask), 1);
	CHECK(FD_ISSET(fd, &r), "pselect: the socket is readable");
	READ_EXACT(fd, buf, 60);
	VERIFY(buf, 60, 31, off);
	off += 60;
	EQ(poll(p, 2, 0), 0);

	/* 5. Both ready at once. */
	WRITE_ALL(fd, "S", 1);
	SYS(write(pfd[1], "y", 1));
	/* Wait for the socket alone first, so both are surely ready. */
	CHECK(wait_fd(fd, POLLIN, 5000) & POLLIN, "the socket becomes readable");
	EQ(poll(p, 2, 5000), 2);
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_SET(pfd[0], &r);
	tv = (struct timeval){ .tv_sec = 5 };
	EQ(select(nf, &r, NULL, NULL, &tv), 2);
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_SET(pfd[0], &r);
	FD_ZERO(&w);
	FD_SET(fd, &w);
	EQ(pselect(nf, &r, &w, NULL, &ts, &mask), 3);
	READ_EXACT(fd, buf, 100);
	VERIFY(buf, 100, 31, off);
	SYS(read(pfd[0], &x, 1));

	/* 6. A blocking wait with a long timeout returns when the data comes. */
	WRITE_ALL(fd, "S", 1);
	t0 = now_ms();
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_SET(pfd[0], &r);
	tv = (struct timeval){ .tv_sec = 8 };
	EQ(select(nf, &r, NULL, NULL, &tv), 1);
	CHECK(now_ms() - t0 < 4000, "select returned when data arrived, not at its timeout");
	READ_EXACT(fd, buf, 100);

	/* 7. End of stream is readable, and reads return 0. */
	WRITE_ALL(fd, "C", 1);
	EQ(poll(p, 1, 5000), 1);
	CHECK(p[0].revents & POLLIN, "end of stream is readable (revents 0x%x)", p[0].revents);
	FD_ZERO(&r);
	FD_SET(fd, &r);
	tv = (struct timeval){ .tv_sec = 5 };
	EQ(select(nf, &r, NULL, NULL, &tv), 1);
	EXPECT_EOF(fd);
	SYS(close(fd));
	close(pfd[0]);
	close(pfd[1]);
}
