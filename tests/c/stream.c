/* stream.c: stream basics. socket/bind/listen/accept/accept4/connect,
 * read/write, readv/writev, recv/send with MSG_PEEK, MSG_WAITALL and
 * MSG_DONTWAIT, recvfrom/sendto, recvmsg/sendmsg with several iovecs, large
 * transfers, getsockname/getpeername and SO_ERROR: two connections.
 * PART "duplex": one connection carrying 16 MiB each way at once, a sending
 * and a receiving thread at each end. */
#include "capi.h"

#define BIG (16u << 20) /* bytes each way in the large transfer */

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void check_so_error(int fd)
{
	int err = -1;
	socklen_t l = sizeof err;
	SYS(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l));
	EQ(l, sizeof(int));
	EQ(err, 0);
}

/* ---- large transfer: one thread sends, the calling one receives ---------- */

struct big {
	int fd;
	uint32_t seed;
	uint64_t rng;
	const char *who;
};

static void *big_sender(void *arg)
{
	struct big *b = arg;
	role = b->who;
	const size_t cap = 256 << 10;
	uint8_t *buf = malloc(cap);
	CHECK(buf != NULL, "malloc");
	uint64_t off = 0;
	while (off < BIG) {
		size_t n = 1 + rnd(&b->rng) % cap;
		if (n > BIG - off)
			n = BIG - off;
		fill(buf, n, b->seed, off);
		ssize_t w;
		errno = 0;
		switch (rnd(&b->rng) % 4) {
		case 0:
			w = write(b->fd, buf, n);
			break;
		case 1:
			w = send(b->fd, buf, n, 0);
			break;
		case 2: {
			struct iovec v[2] = { { buf, n / 2 }, { buf + n / 2, n - n / 2 } };
			w = writev(b->fd, v, 2);
			break;
		}
		default: {
			struct iovec v[3] = { { buf, n / 3 }, { buf + n / 3, 0 }, { buf + n / 3, n - n / 3 } };
			struct msghdr m = { .msg_iov = v, .msg_iovlen = 3 };
			w = sendmsg(b->fd, &m, 0);
		}
		}
		if (w <= 0)
			FAIL("large transfer: send of %zu bytes at offset %llu returned %zd", n,
			     (unsigned long long)off, w);
		off += (uint64_t)w;
	}
	free(buf);
	return NULL;
}

static void big_receive(int fd, uint32_t seed, uint64_t rng)
{
	const size_t cap = 200 << 10;
	uint8_t *buf = malloc(cap);
	CHECK(buf != NULL, "malloc");
	uint64_t off = 0;
	while (off < BIG) {
		size_t n = 1 + rnd(&rng) % cap;
		if (n > BIG - off)
			n = BIG - off;
		ssize_t r;
		errno = 0;
		switch (rnd(&rng) % 4) {
		case 0:
			r = read(fd, buf, n);
			break;
		case 1:
			r = recv(fd, buf, n, 0);
			break;
		case 2: {
			struct iovec v[2] = { { buf, n / 2 }, { buf + n / 2, n - n / 2 } };
			r = readv(fd, v, 2);
			break;
		}
		default: {
			struct iovec v[2] = { { buf, n / 3 }, { buf + n / 3, n - n / 3 } };
			struct msghdr m = { .msg_iov = v, .msg_iovlen = 2 };
			r = recvmsg(fd, &m, 0);
		}
		}
		if (r <= 0)
			FAIL("large transfer: receive at offset %llu of %u returned %zd", (unsigned long long)off, BIG, r);
		VERIFY(buf, (size_t)r, seed, off);
		off += (uint64_t)r;
	}
	free(buf);
}

/* one_way_send sends BIG bytes of stream seed from the calling thread. */
static void one_way_send(int fd, uint32_t seed, const char *who)
{
	struct big b = { .fd = fd, .seed = seed, .rng = 0x1234567 + seed, .who = who };
	big_sender(&b);
	role = who;
}

/* both_ways sends BIG bytes of stream tx while receiving BIG of stream rx. */
static void both_ways(int fd, uint32_t tx, uint32_t rx, const char *who)
{
	struct big b = { .fd = fd, .seed = tx, .rng = 0x1234567 + tx, .who = who };
	pthread_t th;
	if (pthread_create(&th, NULL, big_sender, &b))
		FAIL("pthread_create");
	big_receive(fd, rx, 0x7654321 + rx);
	pthread_join(th, NULL);
}

/* ---- server ---------------------------------------------------------------- */

static int is_duplex(struct ctx *c) { return !strcmp(c->part, "duplex"); }

static void server(struct ctx *c)
{
	int lfd = c->lfd[0];
	if (is_duplex(c)) {
		int fd = ACCEPT(lfd);
		both_ways(fd, 8, 7, "server-tx");
		SEND_TAG(fd, "bigok");
		EXPECT_TAG(fd, "bigok");
		EXPECT_EOF(fd);
		SYS(close(fd));
		return;
	}
	struct sockaddr_storage pa;
	socklen_t pl = sizeof pa;
	int fd;
	do {
		fd = accept(lfd, (struct sockaddr *)&pa, &pl);
	} while (fd < 0 && errno == EINTR);
	CHECK(fd >= 0, "accept");
	EQ(pl, sizeof(struct sockaddr_in));
	EQ(pa.ss_family, AF_INET);
	char ip[64];
	CHECK(!strcmp(sa_ip(&pa, ip, sizeof ip), "127.0.0.1"), "accept's peer address is %s", ip);
	EQ(peer_port(fd), sa_port(&pa));
	EQ(local_port(fd), c->port[0]); /* the application's port, never the SDP port */
	check_so_error(fd);

	/* Hello: the client's view of the ports. */
	uint32_t hello[2];
	READ_EXACT(fd, hello, sizeof hello);
	EQ(hello[0], (uint32_t)sa_port(&pa)); /* client's getsockname port == our getpeername port */
	EQ(hello[1], (uint32_t)c->port[0]);   /* client's getpeername port == the listener's */

	/* read/write */
	uint8_t buf[200000];
	fill(buf, 100, 1, 0);
	WRITE_ALL(fd, buf, 100);

	/* readv with 4 iovecs of other sizes than the client's writev */
	{
		size_t total = 1 + 1000 + 70000, got = 0;
		static uint8_t r[71001];
		while (got < total) {
			size_t left = total - got;
			size_t a = left < 3 ? left : 3, bb = left - a < 5000 ? left - a : 5000;
			size_t cc = left - a - bb < 17 ? left - a - bb : 17;
			struct iovec v[4] = { { r + got, a }, { r + got + a, bb }, { r + got + a + bb, cc },
					      { r + got + a + bb + cc, left - a - bb - cc } };
			ssize_t n = SYS(readv(fd, v, 4));
			CHECK(n > 0, "readv returned 0 after %zu of %zu bytes", got, total);
			got += (size_t)n;
		}
		VERIFY(r, total, 2, 0);
	}

	/* MSG_PEEK: ten bytes, then wait for the client */
	WRITE_ALL(fd, "0123456789", 10);
	EXPECT_TAG(fd, "peeked");

	/* MSG_WAITALL: 100000 bytes in 1000-byte writes */
	for (int i = 0; i < 100; i++) {
		fill(buf, 1000, 3, (uint64_t)i * 1000);
		WRITE_ALL(fd, buf, 1000);
	}
	/* MSG_DONTWAIT: the client finds nothing, then sends with it */
	RECV_PAT(fd, 3000, 4, 0);

	/* recvfrom on a connected stream socket reports no address */
	{
		size_t got = 0;
		while (got < 5000) {
			struct sockaddr_storage from;
			memset(&from, 0xa5, sizeof from);
			socklen_t fl = sizeof from;
			ssize_t n = SYS(recvfrom(fd, buf + got, 5000 - got, 0, (struct sockaddr *)&from, &fl));
			CHECK(n > 0, "recvfrom returned 0 after %zu bytes", got);
			EQ(fl, 0);
			got += (size_t)n;
		}
		VERIFY(buf, 5000, 5, 0);
	}

	/* sendmsg with five iovecs, one of them empty */
	{
		size_t lens[5] = { 7, 0, 4096, 13, 65536 }, total = 0;
		static uint8_t s[7 + 4096 + 13 + 65536];
		struct iovec v[5];
		for (int i = 0; i < 5; i++) {
			v[i].iov_base = s + total;
			v[i].iov_len = lens[i];
			total += lens[i];
		}
		fill(s, total, 6, 0);
		size_t sent = 0;
		while (sent < total) {
			/* advance the iovecs past what was sent */
			struct iovec w[5];
			int k = 0;
			size_t skip = sent;
			for (int i = 0; i < 5; i++) {
				if (skip >= v[i].iov_len) {
					skip -= v[i].iov_len;
					continue;
				}
				w[k].iov_base = (char *)v[i].iov_base + skip;
				w[k++].iov_len = v[i].iov_len - skip;
				skip = 0;
			}
			struct msghdr m = { .msg_iov = w, .msg_iovlen = k };
			ssize_t n = SYS(sendmsg(fd, &m, 0));
			sent += (size_t)n;
		}
	}
	EXPECT_TAG(fd, "msgok");

	/* 16 MiB each way, one direction after the other */
	big_receive(fd, 7, 0x7654321 + 7);
	one_way_send(fd, 8, "server");
	SEND_TAG(fd, "bigok");
	EXPECT_TAG(fd, "bigok");
	check_so_error(fd);

	/* second connection with accept4(SOCK_CLOEXEC) */
	int fd2;
	do {
		fd2 = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	} while (fd2 < 0 && errno == EINTR);
	CHECK(fd2 >= 0, "accept4");
	CHECK(SYS(fcntl(fd2, F_GETFD)) & FD_CLOEXEC, "accept4(SOCK_CLOEXEC) sets FD_CLOEXEC");
	CHECK(!(SYS(fcntl(fd2, F_GETFL)) & O_NONBLOCK), "accept4 without SOCK_NONBLOCK leaves the socket blocking");
	EQ(local_port(fd2), c->port[0]);
	EXPECT_TAG(fd2, "second");
	SEND_TAG(fd2, "second");
	EXPECT_EOF(fd2);
	SYS(close(fd2));

	/* The client closes the first connection last. */
	EXPECT_EOF(fd);
	SYS(close(fd));
	SYS(close(lfd));
}

/* ---- client ------------------------------------------------------------------- */

static void client(struct ctx *c)
{
	int port = c->port[0];
	if (is_duplex(c)) {
		int fd = connect4(port);
		both_ways(fd, 7, 8, "client-tx");
		SEND_TAG(fd, "bigok");
		EXPECT_TAG(fd, "bigok");
		SYS(close(fd));
		return;
	}
	int fd = SYS(socket(AF_INET, SOCK_STREAM, 0));
	struct sockaddr_storage ss;
	socklen_t l = mkaddr(&ss, AF_INET, "127.0.0.1", port);
	SYS(connect(fd, (struct sockaddr *)&ss, l));
	ERR(connect(fd, (struct sockaddr *)&ss, l), EISCONN);
	check_so_error(fd);

	struct sockaddr_storage pa, la;
	socklen_t pl = sizeof pa, ll = sizeof la;
	SYS(getpeername(fd, (struct sockaddr *)&pa, &pl));
	SYS(getsockname(fd, (struct sockaddr *)&la, &ll));
	EQ(pl, sizeof(struct sockaddr_in));
	EQ(ll, sizeof(struct sockaddr_in));
	EQ(sa_port(&pa), port); /* the application's port, never the SDP port */
	char ip[64];
	CHECK(!strcmp(sa_ip(&pa, ip, sizeof ip), "127.0.0.1"), "getpeername address is %s", ip);
	CHECK(!strcmp(sa_ip(&la, ip, sizeof ip), "127.0.0.1"), "getsockname address is %s", ip);
	uint32_t hello[2] = { (uint32_t)sa_port(&la), (uint32_t)sa_port(&pa) };
	WRITE_ALL(fd, hello, sizeof hello);

	/* read/write */
	uint8_t buf[200000];
	READ_EXACT(fd, buf, 100);
	VERIFY(buf, 100, 1, 0);

	/* writev with three iovecs */
	{
		static uint8_t s[71001];
		fill(s, sizeof s, 2, 0);
		struct iovec v[3] = { { s, 1 }, { s + 1, 1000 }, { s + 1001, 70000 } };
		size_t total = sizeof s, sent = 0;
		ssize_t n = SYS(writev(fd, v, 3));
		sent = (size_t)n;
		if (sent < total)
			WRITE_ALL(fd, s + sent, total - sent);
	}

	/* MSG_PEEK */
	{
		char p[16];
		ssize_t n = SYS(recv(fd, p, 3, MSG_PEEK));
		CHECK(n >= 1 && n <= 3, "recv(3, MSG_PEEK) returned %zd", n);
		CHECK(!memcmp(p, "012", (size_t)n), "peeked \"%.*s\"", (int)n, p);
		n = SYS(recv(fd, p, 10, MSG_PEEK));
		CHECK(n >= 1 && n <= 10 && !memcmp(p, "0123456789", (size_t)n), "second peek returned %zd", n);
		READ_EXACT(fd, p, 2);
		CHECK(!memcmp(p, "01", 2), "read after peek got \"%.2s\"", p);
		n = SYS(recv(fd, p, 3, MSG_PEEK));
		CHECK(n >= 1 && n <= 3 && !memcmp(p, "234", (size_t)n), "peek after read returned %zd \"%.*s\"", n,
		      (int)(n > 0 ? n : 0), p);
		n = SYS(recv(fd, p, 8, MSG_WAITALL));
		EQ(n, 8);
		CHECK(!memcmp(p, "23456789", 8), "got \"%.8s\"", p);
	}
	SEND_TAG(fd, "peeked");

	/* MSG_WAITALL: one call returns all 100000 bytes */
	{
		ssize_t n;
		do {
			n = recv(fd, buf, 100000, MSG_WAITALL);
		} while (n < 0 && errno == EINTR);
		EQ(n, 100000);
		VERIFY(buf, 100000, 3, 0);
	}

	/* MSG_DONTWAIT: nothing is pending now */
	ERR(recv(fd, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
	CHECK(!(SYS(fcntl(fd, F_GETFL)) & O_NONBLOCK), "MSG_DONTWAIT leaves the socket blocking");
	fill(buf, 3000, 4, 0);
	{
		ssize_t n = send(fd, buf, 3000, MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN)
			n = 0;
		CHECK(n >= 0, "send(MSG_DONTWAIT)");
		if (n < 3000)
			WRITE_ALL(fd, buf + n, 3000 - (size_t)n);
	}

	/* sendto without an address on a connected socket */
	fill(buf, 5000, 5, 0);
	{
		size_t sent = 0;
		while (sent < 5000) {
			ssize_t n = SYS(sendto(fd, buf + sent, 5000 - sent, 0, NULL, 0));
			sent += (size_t)n;
		}
	}

	/* recvmsg with three iovecs */
	{
		size_t total = 7 + 4096 + 13 + 65536, got = 0;
		static uint8_t r[7 + 4096 + 13 + 65536];
		while (got < total) {
			size_t left = total - got, a = left < 100 ? left : 100;
			size_t bb = left - a < 1 ? left - a : 1;
			struct iovec v[3] = { { r + got, a }, { r + got + a, bb }, { r + got + a + bb, left - a - bb } };
			struct msghdr m = { .msg_iov = v, .msg_iovlen = 3 };
			ssize_t n = SYS(recvmsg(fd, &m, 0));
			CHECK(n > 0, "recvmsg returned 0 after %zu of %zu bytes", got, total);
			CHECK(!(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)), "recvmsg msg_flags 0x%x", m.msg_flags);
			got += (size_t)n;
		}
		VERIFY(r, total, 6, 0);
	}
	SEND_TAG(fd, "msgok");

	one_way_send(fd, 7, "client");
	big_receive(fd, 8, 0x7654321 + 8);
	SEND_TAG(fd, "bigok");
	EXPECT_TAG(fd, "bigok");

	/* second connection, accepted with accept4 */
	int fd2 = connect4(port);
	EQ(peer_port(fd2), port);
	SEND_TAG(fd2, "second");
	EXPECT_TAG(fd2, "second");
	SYS(close(fd2));

	check_so_error(fd);
	SYS(close(fd));
}
