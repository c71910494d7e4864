/* zcopy_write.c: blocking receives of 1 MiB into one buffer, the case
 * SDP's Write ZCopy is for. In each round the server says "go" and then
 * waits in one blocking recv(MSG_WAITALL) of MSG bytes; the client, on
 * "go", sends MSG bytes in one blocking send(). Over SDP the server's
 * recv offers its buffer (SinkAvail) and the client's send RDMA-Writes
 * into it (the test checks the engine's counters); every byte is checked. */
#include "capi.h"

#define MSG (1u << 20)
#define ROUNDS 8

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void server(struct ctx *c)
{
	uint8_t *buf = malloc(MSG);
	CHECK(buf != NULL, "malloc");
	int fd = ACCEPT(c->lfd[0]);
	for (uint64_t r = 0; r < ROUNDS; r++) {
		memset(buf, 0, MSG);
		SEND_TAG(fd, "go");
		RECV_WHOLE(fd, buf, MSG, 0);
		VERIFY(buf, MSG, 93, r * MSG);
	}
	SEND_TAG(fd, "done");
	EXPECT_EOF(fd);
	SYS(close(fd));
	SYS(close(c->lfd[0]));
	free(buf);
}

static void client(struct ctx *c)
{
	uint8_t *buf = malloc(MSG);
	CHECK(buf != NULL, "malloc");
	int fd = connect4(c->port[0]);
	for (uint64_t r = 0; r < ROUNDS; r++) {
		fill(buf, MSG, 93, r * MSG);
		EXPECT_TAG(fd, "go");
		SEND_WHOLE(fd, buf, MSG, 0);
	}
	EXPECT_TAG(fd, "done");
	SYS(close(fd));
	free(buf);
}
