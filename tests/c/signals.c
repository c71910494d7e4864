/* signals.c: a blocking recv interrupted by SIGALRM.
 *
 * PART "eintr": the handler is installed without SA_RESTART; recv returns -1
 * with EINTR and the connection works afterwards.
 * PART "restart": the handler is installed with SA_RESTART; recv goes on
 * after the handler and returns the data that came later.
 *
 * The server sends its data only when the client asks, after the signal,
 * so the recv is surely blocked when the timer fires. One connection. */
#include "capi.h"

static volatile sig_atomic_t alarms;
static int notify[2]; /* the handler writes to it (restart) */

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
	if (alarms > 1) {
		static const char m[] = "FAIL: recv still blocked 10 s after the signal\n";
		ssize_t w = write(2, m, sizeof m - 1);
		(void)w;
		_exit(2);
	}
	ssize_t w = write(notify[1], "a", 1);
	(void)w;
	alarm(10); /* the watchdog for the rest of the wait */
}

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void server(struct ctx *c)
{
	int fd = ACCEPT(c->lfd[0]);
	SEND_TAG(fd, "hello");
	EXPECT_TAG(fd, "go");
	SEND_TAG(fd, "data");
	EXPECT_EOF(fd);
	SYS(close(fd));
	SYS(close(c->lfd[0]));
}

/* asker waits for the handler's note, then asks the server for the data. */
static int ask_fd;
static void *asker(void *arg)
{
	(void)arg;
	role = "client-asker";
	mask_signal(SIG_BLOCK, SIGALRM);
	CHECK(wait_fd(notify[0], POLLIN, 10000) & POLLIN, "the SIGALRM handler ran within 10 s");
	SEND_TAG(ask_fd, "go");
	return NULL;
}

static void client(struct ctx *c)
{
	int restart = !strcmp(c->part, "restart");
	int fd = connect4(c->port[0]);
	EXPECT_TAG(fd, "hello");
	SYS(pipe(notify));

	catch_signal(SIGALRM, on_alarm, restart);
	pthread_t th;
	if (restart) {
		ask_fd = fd;
		if (pthread_create(&th, NULL, asker, NULL))
			FAIL("pthread_create");
	}
	alarm_in_ms(200);

	char b[TAGLEN];
	errno = 0;
	ssize_t n = recv(fd, b, sizeof b, MSG_WAITALL);
	int err = errno;
	EQ(alarms, 1);
	if (restart) {
		CHECK(n == TAGLEN, "recv goes on after an SA_RESTART handler and returns the data: "
				   "returned %zd, errno %d (%s)", n, err, strerror(err));
		CHECK(!memcmp(b, "data", 4), "got \"%.8s\"", b);
		pthread_join(th, NULL);
	} else {
		CHECK(n == -1 && err == EINTR, "recv interrupted by a handler without SA_RESTART fails with "
					       "EINTR: returned %zd, errno %d (%s)", n, err, strerror(err));
		/* The connection still works. */
		SEND_TAG(fd, "go");
		EXPECT_TAG(fd, "data");
	}
	watchdog(WATCHDOG_SEC);
	SYS(close(fd));
}
