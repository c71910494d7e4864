/* sigurg.c: SIGURG and urgent marks that follow each other. The socket's
 * owner gets SIGURG once for each new urgent mark, and the handler has run
 * by the time a poll or a read woken by the urgent data returns. A newer
 * urgent byte takes the mark: an older one the reader has not reached
 * stays in the stream, one the reader stands at is skipped. The expected
 * results are Linux TCP's.
 *
 * PART says who owns the socket and when the handler is installed:
 *   pid   F_SETOWN getpid(), handler installed before the first I/O
 *   pgrp  F_SETOWN -getpgrp() (the test runs each program as its own group)
 *   tid   F_SETOWN_EX F_OWNER_TID, the server's thread
 *   late  F_SETOWN getpid(), handler installed after the first I/O
 *   ioctl FIOSETOWN getpid()
 *   inhandler  F_SETOWN getpid(); the handler calls recv(MSG_OOB) (first part only)
 *   longjmp    F_SETOWN -getpgrp(); the handler leaves by siglongjmp (first part only) */
#include "capi.h"
#include <setjmp.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

static volatile sig_atomic_t urg_count, urg_tid_ok = 1;
/* inhandler: the handler reads the urgent byte itself, the classic use. */
static int h_fd = -1;
static volatile sig_atomic_t h_n = -2, h_b, h_err;
/* longjmp: the handler leaves by siglongjmp, once (ftpd's ABOR handling). */
static sigjmp_buf jb;
static volatile sig_atomic_t jmp_armed;

/* on_urg counts the calls and checks that they run on the main thread, the
 * server's only thread of its own (libsdp's engine threads must not take
 * the signal). */
static void on_urg(int sig)
{
	(void)sig;
	if ((pid_t)syscall(SYS_gettid) != getpid())
		urg_tid_ok = 0;
	urg_count++;
	if (jmp_armed) {
		jmp_armed = 0;
		siglongjmp(jb, 1);
	}
	if (h_fd >= 0 && h_n == -2) {
		int saved = errno;
		char b = 0;
		h_n = (sig_atomic_t)recv(h_fd, &b, 1, MSG_OOB);
		h_b = b;
		h_err = errno;
		errno = saved;
	}
}

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void handler(void) { catch_signal(SIGURG, on_urg, 1); }

static void own(struct ctx *c, int fd)
{
	if (!strcmp(c->part, "pgrp") || !strcmp(c->part, "longjmp")) {
		SYS(fcntl(fd, F_SETOWN, -getpgrp()));
		EQ(fcntl(fd, F_GETOWN), -getpgrp());
	} else if (!strcmp(c->part, "tid")) {
		struct f_owner_ex o = { .type = F_OWNER_TID, .pid = (pid_t)syscall(SYS_gettid) };
		SYS(fcntl(fd, F_SETOWN_EX, &o));
	} else if (!strcmp(c->part, "ioctl")) {
		int pid = getpid();
		SYS(ioctl(fd, FIOSETOWN, &pid));
		EQ(fcntl(fd, F_GETOWN), pid);
	} else {
		SYS(fcntl(fd, F_SETOWN, getpid()));
	}
}

/* wait_pri polls for POLLPRI alone: it returns once urgent data is there
 * (a poll the signal interrupts goes on, within the deadline). */
static void wait_pri(int fd)
{
	int64_t end = now_ms() + 10000;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLPRI };
		int n = poll(&p, 1, (int)(end - now_ms() > 0 ? end - now_ms() : 0));
		if (n == 1 && (p.revents & POLLPRI))
			return;
		CHECK(n == 1 || (n < 0 && errno == EINTR) || n == 0, "poll returned %d", n);
		CHECK(now_ms() < end, "no POLLPRI within 10 s (revents 0x%x)", p.revents);
	}
}

/* wait_count waits (bounded) for the handler to have run n times in all. */
static void wait_count(int fd, int n)
{
	int64_t end = now_ms() + 10000;
	while (urg_count < n) {
		CHECK(now_ms() < end, "SIGURG %d times within 10 s, want %d", (int)urg_count, n);
		struct pollfd p = { .fd = fd, .events = POLLPRI };
		poll(&p, 1, 100);
	}
}

/* wait_oob waits (bounded) until the urgent byte is want. */
static void wait_oob(int fd, char want)
{
	int64_t end = now_ms() + 10000;
	for (;;) {
		char b = 0;
		ssize_t n = recv(fd, &b, 1, MSG_OOB | MSG_PEEK);
		if (n == 1 && b == want)
			return;
		/* EINVAL: the last urgent byte was read and no new one is in yet */
		CHECK(n == 1 || errno == EAGAIN || errno == EINTR || errno == EINVAL, "recv(MSG_OOB|MSG_PEEK) returned %zd", n);
		CHECK(now_ms() < end, "urgent byte '%c' not in within 10 s", want);
		struct pollfd p = { .fd = fd, .events = POLLPRI };
		poll(&p, 1, 100);
	}
}

#define RECV_STR(fd, want)                                                                  \
	do {                                                                                \
		char b_[64] = { 0 };                                                        \
		size_t w_ = strlen(want);                                                   \
		ssize_t n_ = recv((fd), b_, sizeof b_, 0);                                 \
		if (n_ != (ssize_t)w_ || memcmp(b_, (want), w_))                            \
			FAIL("recv returned %zd \"%.*s\", want \"%s\"", n_, (int)(n_ > 0 ? n_ : 0), b_, (want)); \
	} while (0)

/* EXPECT_OOB reads the urgent byte, which must be want. */
#define EXPECT_OOB(fd, want)                          \
	do {                                          \
		char o_ = 0;                          \
		EQ(recv((fd), &o_, 1, MSG_OOB), 1);   \
		EQ(o_, (want));                       \
	} while (0)

/* NEXT_MARK asks the client for its next urgent byte (tag) and waits until
 * the handler has run n times in all and the reader stands at the mark. */
#define NEXT_MARK(fd, tag, n)          \
	do {                           \
		SEND_TAG(fd, tag);     \
		wait_count(fd, n);     \
		wait_pri(fd);          \
		EQ(atmark(fd), 1);     \
	} while (0)

static void server(struct ctx *c)
{
	int late = !strcmp(c->part, "late");
	if (!late)
		handler(); /* before the engine, if any, is loaded */
	int fd = ACCEPT(c->lfd[0]);
	own(c, fd);
	int inh = !strcmp(c->part, "inhandler"), lj = !strcmp(c->part, "longjmp");
	if (inh)
		h_fd = fd;
	SEND_TAG(fd, "s0"); /* the first I/O (under libsdp: the engine loads) */
	if (late)
		handler();
	if (!lj)
		SEND_TAG(fd, "s1");
	char b;

	/* Blocked in poll: "ab", "cd" with 'd' urgent, "ef". */
	if (lj) {
		volatile int jumped = 0;
		if (sigsetjmp(jb, 1) == 0) {
			jmp_armed = 1; /* before the client may send */
			SEND_TAG(fd, "s1");
			int64_t end = now_ms() + 10000;
			while (now_ms() < end) { /* the handler jumps out of here */
				struct pollfd p = { .fd = fd, .events = POLLIN };
				poll(&p, 1, 100);
			}
		} else {
			jumped = 1;
		}
		EQ(jumped, 1);
		EQ(urg_count, 1);
		wait_pri(fd); /* the calls after the jump work */
		RECV_STR(fd, "abc");
		EQ(atmark(fd), 1);
		EXPECT_OOB(fd, 'd');
		RECV_STR(fd, "ef");
		SEND_TAG(fd, "end");
		EXPECT_EOF(fd);
		SYS(close(fd));
		SYS(close(c->lfd[0]));
		return;
	}
	if (inh) {
		/* The handler may come before the byte (EAGAIN), as on TCP when
		 * the urgent pointer arrives first. */
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n;
		do
			n = poll(&p, 1, 10000);
		while (n < 0 && errno == EINTR);
		EQ(n, 1);
		wait_count(fd, 1);
		if (h_n == 1) {
			EQ(h_b, 'd');
			EQ(recv(fd, &b, 1, MSG_OOB), -1); /* read already */
		} else {
			CHECK(h_n == -1 && h_err == EAGAIN, "recv(MSG_OOB) in the handler: %d, errno %d", (int)h_n, (int)h_err);
			wait_pri(fd);
			EXPECT_OOB(fd, 'd');
		}
		RECV_STR(fd, "abc");
		EQ(atmark(fd), 1);
		RECV_STR(fd, "ef");
		EQ(urg_count, 1);
		SEND_TAG(fd, "end");
		EXPECT_EOF(fd);
		SYS(close(fd));
		SYS(close(c->lfd[0]));
		return;
	}
	wait_pri(fd);
	EQ(urg_count, 1); /* the handler ran before poll returned */
	EQ(atmark(fd), 0);
	RECV_STR(fd, "abc");
	EQ(atmark(fd), 1);
	EXPECT_OOB(fd, 'd');
	EQ(recv(fd, &b, 1, MSG_OOB | MSG_DONTWAIT), -1);
	RECV_STR(fd, "ef");
	EQ(urg_count, 1); /* once per mark */
	SEND_TAG(fd, "s2");

	/* Blocked in read: "xy" with 'y' urgent. */
	RECV_STR(fd, "x");
	EQ(urg_count, 2);
	wait_pri(fd); /* 'y' may come a little after 'x' */
	EQ(atmark(fd), 1);
	EXPECT_OOB(fd, 'y');
	SEND_TAG(fd, "s3");

	/* Overtaken: "gh" with 'h' urgent, then "ij" with 'j' urgent, then "k";
	 * 'h' was not reached, so it is normal data. Two marks so close may
	 * raise SIGURG while the first is still pending: one handler call. */
	wait_oob(fd, 'j');
	CHECK(urg_count == 3 || urg_count == 4, "SIGURG %d times, want 3 or 4", (int)urg_count);
	int base = urg_count;
	RECV_STR(fd, "ghi");
	EQ(atmark(fd), 1);
	EXPECT_OOB(fd, 'j');
	RECV_STR(fd, "k");
	EQ(atmark(fd), 0);

	/* Several in a row, the reader at each mark when the next comes: 'A'
	 * and 'B' leave the stream, read or not. */
	NEXT_MARK(fd, "s4", base + 1);
	EXPECT_OOB(fd, 'A');
	NEXT_MARK(fd, "s5", base + 2);
	EXPECT_OOB(fd, 'B');
	NEXT_MARK(fd, "s6", base + 3);
	RECV_STR(fd, "end"); /* 'C', never read, is skipped too */
	EQ(atmark(fd), 0);
	EQ(urg_count, base + 3);
	EQ(urg_tid_ok, 1); /* always on the main thread */

	SEND_TAG(fd, "end");
	EXPECT_EOF(fd);
	SYS(close(fd));
	SYS(close(c->lfd[0]));
}

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	EXPECT_TAG(fd, "s0");
	EXPECT_TAG(fd, "s1");
	EQ(send(fd, "ab", 2, 0), 2);
	EQ(send(fd, "cd", 2, MSG_OOB), 2);
	EQ(send(fd, "ef", 2, 0), 2);
	if (!strcmp(c->part, "inhandler") || !strcmp(c->part, "longjmp")) {
		EXPECT_TAG(fd, "end");
		SYS(close(fd));
		return;
	}
	EXPECT_TAG(fd, "s2");
	EQ(send(fd, "xy", 2, MSG_OOB), 2);
	EXPECT_TAG(fd, "s3");
	EQ(send(fd, "gh", 2, MSG_OOB), 2);
	EQ(send(fd, "ij", 2, MSG_OOB), 2);
	EQ(send(fd, "k", 1, 0), 1);
	EXPECT_TAG(fd, "s4");
	EQ(send(fd, "A", 1, MSG_OOB), 1);
	EXPECT_TAG(fd, "s5");
	EQ(send(fd, "B", 1, MSG_OOB), 1);
	EXPECT_TAG(fd, "s6");
	EQ(send(fd, "C", 1, MSG_OOB), 1);
	EQ(send(fd, "end", 3, 0), 3);
	EXPECT_TAG(fd, "end");
	SYS(close(fd));
}
