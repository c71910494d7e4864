/* zcopy.c: large blocking transfers, the case SDP's zero copy is for. The
 * client sends ROUNDS messages of MSG bytes, each in one blocking send()
 * from one buffer; the server reads each with blocking recv(MSG_WAITALL)
 * into one buffer, checks every byte and answers a tag, so that it is
 * already waiting in recv when the next message is sent. Then the same
 * the other way. Over SDP these go by Read ZCopy (the test checks the
 * engine's counters); the bytes must be the same either way. */
#include "capi.h"

#define MSG (1u << 20)
#define ROUNDS 8

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void send_msgs(int fd, uint8_t *buf, uint32_t seed)
{
	for (uint64_t r = 0; r < ROUNDS; r++) {
		fill(buf, MSG, seed, r * MSG);
		SEND_WHOLE(fd, buf, MSG, 1);
		EXPECT_TAG(fd, "got");
	}
}

static void recv_msgs(int fd, uint8_t *buf, uint32_t seed)
{
	for (uint64_t r = 0; r < ROUNDS; r++) {
		memset(buf, 0, MSG);
		RECV_WHOLE(fd, buf, MSG, 1);
		VERIFY(buf, MSG, seed, r * MSG);
		SEND_TAG(fd, "got");
	}
}

static void server(struct ctx *c)
{
	uint8_t *buf = malloc(MSG);
	CHECK(buf != NULL, "malloc");
	int fd = ACCEPT(c->lfd[0]);
	recv_msgs(fd, buf, 91);
	send_msgs(fd, buf, 92);
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
	send_msgs(fd, buf, 91);
	recv_msgs(fd, buf, 92);
	SYS(close(fd));
	free(buf);
}
