/* zcopy_intr.c: blocking calls that wait on a zero-copy transfer, interrupted by SIGALRM.
 * Two connections: data on the first listener, control tags on the second; the peer does
 * not touch the data connection until told on the control one.
 *
 * PART "send": the client makes one blocking send of BIG bytes (more than TCP's buffers
 * take) to a server that reads nothing yet; a handler installed without SA_RESTART
 * interrupts it. As on TCP, the send returns what was taken (0 < n < BIG) or -1/EINTR, at
 * once. The client then overwrites the bytes reported taken (the engine must not read them
 * again), tells the server to read and sends the rest; the server checks every byte.
 * PART "restart": the same with SA_RESTART, and a helper thread tells the server to read
 * once the handler ran: the send never fails with EINTR; Linux's TCP returns the partial
 * count, libsdp goes on waiting and returns once the server read the offered bytes.
 * PART "recv": the server's blocking recv(MSG_WAITALL) of MSG bytes, with nothing coming,
 * is interrupted without SA_RESTART: -1/EINTR. Then the client sends MSG bytes; the server
 * reads them into another buffer, checks them, and checks that the interrupted call's
 * buffer was never written. */
#include "capi.h"

#define BIG (64u << 20)
#define MSG (1u << 20)
#define CHUNK (1u << 20)

static volatile sig_atomic_t alarms;
static int notify[2]; /* the handler writes to it (restart) */

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
	ssize_t w = write(notify[1], "a", 1);
	(void)w;
}

/* catch_alarm has on_alarm count SIGALRM and note it on notify. */
static void catch_alarm(int restart)
{
	SYS(pipe(notify));
	catch_signal(SIGALRM, on_alarm, restart);
}

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->lfd[1] = listen4(&c->port[1]);
	c->nl = 2;
}

static void server(struct ctx *c)
{
	int fd = ACCEPT(c->lfd[0]);
	int cfd = ACCEPT(c->lfd[1]);
	SEND_TAG(fd, "hello"); /* the connection is up before the interrupted call */
	uint8_t *buf = malloc(CHUNK);
	CHECK(buf != NULL, "malloc");
	if (!strcmp(c->part, "recv")) {
		uint8_t *first = malloc(MSG);
		CHECK(first != NULL, "malloc");
		memset(first, 0x5a, MSG);
		catch_alarm(0);
		alarm_in_ms(200);
		errno = 0;
		ssize_t n = recv(fd, first, MSG, MSG_WAITALL);
		int err = errno;
		EQ(alarms, 1);
		CHECK(n == -1 && err == EINTR, "a recv interrupted by a handler without SA_RESTART fails with "
					       "EINTR: returned %zd, errno %d (%s)", n, err, strerror(err));
		SEND_TAG(cfd, "go");
		RECV_PAT(fd, MSG, 71, 0);
		for (size_t i = 0; i < MSG; i++)
			if (first[i] != 0x5a)
				FAIL("the interrupted recv's buffer was written at %zu after the call returned", i);
		free(first);
	} else {
		EXPECT_TAG(cfd, "go");
		for (uint64_t off = 0; off < BIG; off += CHUNK) {
			READ_EXACT(fd, buf, CHUNK);
			VERIFY(buf, CHUNK, 72, off);
		}
	}
	SEND_TAG(cfd, "done");
	EXPECT_EOF(fd);
	SYS(close(fd));
	SYS(close(cfd));
	SYS(close(c->lfd[0]));
	SYS(close(c->lfd[1]));
	free(buf);
}

/* asker waits for the handler's note, then tells the server to read. */
static int ask_fd;
static void *asker(void *arg)
{
	(void)arg;
	role = "client-asker";
	CHECK(wait_fd(notify[0], POLLIN, 10000) & POLLIN, "the SIGALRM handler ran within 10 s");
	SEND_TAG(ask_fd, "go");
	return NULL;
}

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	int cfd = connect4(c->port[1]);
	EXPECT_TAG(fd, "hello");
	if (!strcmp(c->part, "recv")) {
		EXPECT_TAG(cfd, "go");
		SEND_PAT(fd, MSG, 71, 0);
	} else {
		int restart = !strcmp(c->part, "restart");
		uint8_t *buf = malloc(BIG);
		CHECK(buf != NULL, "malloc");
		fill(buf, BIG, 72, 0);
		pthread_t th;
		catch_alarm(restart);
		if (restart) {
			/* The asker is born with SIGALRM blocked: the signal goes to this thread. */
			mask_signal(SIG_BLOCK, SIGALRM);
			ask_fd = cfd;
			if (pthread_create(&th, NULL, asker, NULL))
				FAIL("pthread_create");
			mask_signal(SIG_UNBLOCK, SIGALRM);
		}
		alarm_in_ms(200);
		errno = 0;
		int64_t t0 = now_ms();
		ssize_t n = send(fd, buf, BIG, 0);
		int err = errno;
		int64_t dt = now_ms() - t0;
		EQ(alarms, 1);
		printf("send of %u bytes returned %zd (errno %d) after %lld ms\n", BIG, n, err, (long long)dt);
		if (restart) {
			/* Linux restarts a send that took nothing and returns the partial count of
			 * one that took some: never EINTR. */
			CHECK(n > 0, "a send interrupted by an SA_RESTART handler does not fail: returned %zd, "
				     "errno %d (%s)", n, err, strerror(err));
			pthread_join(th, NULL);
			WRITE_ALL(fd, buf + n, BIG - (size_t)n);
		} else {
			CHECK((n > 0 && n < (ssize_t)BIG) || (n == -1 && err == EINTR),
			      "a send interrupted by a handler without SA_RESTART returns what was taken or fails "
			      "with EINTR: returned %zd, errno %d (%s)", n, err, strerror(err));
			if (n < 0)
				n = 0;
			memset(buf, 0xee, (size_t)n); /* taken: the application may reuse it */
			SEND_TAG(cfd, "go");
			WRITE_ALL(fd, buf + n, BIG - (size_t)n);
		}
		free(buf);
	}
	EXPECT_TAG(cfd, "done");
	SYS(close(fd));
	SYS(close(cfd));
}
