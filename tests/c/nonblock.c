/* nonblock.c: non-blocking sockets. O_NONBLOCK set with fcntl and with
 * SOCK_NONBLOCK, connect → EINPROGRESS → poll POLLOUT → SO_ERROR 0, accept
 * and recv → EAGAIN, writes until EAGAIN and the peer draining them. Two
 * connections: the data one (SOCK_NONBLOCK) and a control one (fcntl). */
#include "capi.h"

#define CHUNK 65536
#define WRITE_LIMIT (1u << 30) /* a socket that never says EAGAIN fails here */

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
	/* A non-blocking listener with nothing pending. */
	set_nonblock(c->lfd[0], 1);
	ERR(accept(c->lfd[0], NULL, NULL), EAGAIN);
	ERR(accept4(c->lfd[0], NULL, NULL, SOCK_NONBLOCK), EAGAIN);
}

/* nb_read_exact reads n bytes from a non-blocking socket, polling on EAGAIN. */
#define NB_READ_EXACT(fd, b, n) nb_read_exact(__FILE__, __LINE__, fd, b, n)
static void nb_read_exact(const char *file, int line, int fd, void *b, size_t n)
{
	char *p = b;
	size_t want = n;
	int64_t end = now_ms() + 10000;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r > 0) {
			p += r;
			n -= (size_t)r;
			continue;
		}
		if (r == 0)
			failf(file, line, 0, "end of stream after %zu of %zu bytes", want - n, want);
		if (errno != EAGAIN && errno != EINTR)
			failf(file, line, errno, "read after %zu of %zu bytes", want - n, want);
		if (now_ms() > end)
			failf(file, line, 0, "only %zu of %zu bytes within 10 s", want - n, want);
		wait_fd(fd, POLLIN, 1000);
	}
}

#define NB_WRITE_ALL(fd, b, n) nb_write_all(__FILE__, __LINE__, fd, b, n)
static void nb_write_all(const char *file, int line, int fd, const void *b, size_t n)
{
	const char *p = b;
	int64_t end = now_ms() + 10000;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w == 0 || (errno != EAGAIN && errno != EINTR))
			failf(file, line, errno, "write returned %zd with %zu bytes left", w, n);
		if (now_ms() > end)
			failf(file, line, 0, "could not write within 10 s");
		wait_fd(fd, POLLOUT, 1000);
	}
}

static int nb_accept(int lfd)
{
	CHECK(wait_fd(lfd, POLLIN, 10000) & POLLIN, "a connection to accept within 10 s");
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	CHECK(fd >= 0, "accept4(SOCK_NONBLOCK) after POLLIN");
	CHECK(SYS(fcntl(fd, F_GETFL)) & O_NONBLOCK, "accept4(SOCK_NONBLOCK) gives a non-blocking socket");
	return fd;
}

static void server(struct ctx *c)
{
	int lfd = c->lfd[0];
	int data = nb_accept(lfd);
	int ctl = nb_accept(lfd);
	ERR(accept(lfd, NULL, NULL), EAGAIN);
	EQ(local_port(data), c->port[0]);
	char b[TAGLEN];

	/* The client sends nothing before our "go". */
	ERR(recv(data, b, sizeof b, 0), EAGAIN);
	ERR(read(ctl, b, sizeof b), EAGAIN);
	NB_WRITE_ALL(data, "go------", TAGLEN);

	/* The client fills the data connection, then says how much it wrote. */
	uint64_t total;
	NB_READ_EXACT(ctl, &total, sizeof total);
	CHECK(total > 0 && total <= WRITE_LIMIT, "client wrote %llu bytes", (unsigned long long)total);
	uint8_t *buf = malloc(CHUNK);
	CHECK(buf != NULL, "malloc");
	for (uint64_t off = 0; off < total;) {
		size_t k = total - off < CHUNK ? (size_t)(total - off) : CHUNK;
		NB_READ_EXACT(data, buf, k);
		VERIFY(buf, k, 21, off);
		off += k;
	}
	ERR(recv(data, buf, CHUNK, 0), EAGAIN);
	NB_WRITE_ALL(ctl, "drained", TAGLEN);

	/* After the drain the client can write again. */
	NB_READ_EXACT(data, buf, 1000);
	VERIFY(buf, 1000, 22, 0);
	NB_WRITE_ALL(ctl, "done", TAGLEN);
	free(buf);

	/* Both closed by the client. */
	CHECK(wait_fd(data, POLLIN, 10000) & POLLIN, "end of stream is readable");
	EQ(read(data, b, sizeof b), 0);
	CHECK(wait_fd(ctl, POLLIN, 10000) & POLLIN, "end of stream is readable");
	EQ(read(ctl, b, sizeof b), 0);
	SYS(close(data));
	SYS(close(ctl));
	SYS(close(lfd));
}

/* nb_connect connects fd (non-blocking) the way event loops do. */
static void nb_connect(int fd, int port)
{
	CHECK(SYS(fcntl(fd, F_GETFL)) & O_NONBLOCK, "the socket is non-blocking");
	struct sockaddr_storage ss;
	socklen_t l = mkaddr(&ss, AF_INET, "127.0.0.1", port);
	errno = 0;
	int r = connect(fd, (struct sockaddr *)&ss, l);
	CHECK(r == -1 && errno == EINPROGRESS, "non-blocking connect returns EINPROGRESS (returned %d)", r);
	short re = wait_fd(fd, POLLOUT, 10000);
	CHECK(re & POLLOUT, "POLLOUT once connected (revents 0x%x)", re);
	CHECK(!(re & (POLLERR | POLLHUP)), "no error or hang-up once connected (revents 0x%x)", re);
	int err = -1;
	socklen_t el = sizeof err;
	SYS(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el));
	EQ(err, 0);
	EQ(peer_port(fd), port);
	/* Connecting again reports the connection made: 0 once (Linux) or EISCONN, then EISCONN. */
	errno = 0;
	r = connect(fd, (struct sockaddr *)&ss, l);
	CHECK(r == 0 || errno == EISCONN, "connect after the connection was made returned %d", r);
	ERR(connect(fd, (struct sockaddr *)&ss, l), EISCONN);
}

static void client(struct ctx *c)
{
	int port = c->port[0];
	int data = SYS(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
	nb_connect(data, port);
	int ctl = SYS(socket(AF_INET, SOCK_STREAM, 0));
	set_nonblock(ctl, 1);
	nb_connect(ctl, port);

	char b[TAGLEN];
	NB_READ_EXACT(data, b, TAGLEN);
	CHECK(!memcmp(b, "go------", TAGLEN), "got \"%.8s\"", b);
	ERR(recv(data, b, sizeof b, 0), EAGAIN);
	ERR(read(data, b, sizeof b), EAGAIN);

	/* Write until the socket says EAGAIN (the server is not reading). */
	uint8_t *buf = malloc(CHUNK);
	CHECK(buf != NULL, "malloc");
	uint64_t total = 0;
	for (;;) {
		fill(buf, CHUNK, 21, total);
		ssize_t w = write(data, buf, CHUNK);
		if (w < 0) {
			CHECK(errno == EAGAIN, "write on a full non-blocking socket fails with EAGAIN");
			break;
		}
		CHECK(w > 0, "write returned 0");
		total += (uint64_t)w;
		CHECK(total < WRITE_LIMIT, "a non-blocking socket accepted %u bytes without EAGAIN", WRITE_LIMIT);
	}
	/* Still full: poll says not writable, a second write says EAGAIN. */
	ERR(send(data, buf, CHUNK, MSG_DONTWAIT), EAGAIN);
	NB_WRITE_ALL(ctl, &total, sizeof total);
	NB_READ_EXACT(ctl, b, TAGLEN);
	CHECK(!memcmp(b, "drained", 7), "got \"%.8s\"", b);
	CHECK(wait_fd(data, POLLOUT, 10000) & POLLOUT, "writable again after the peer drained");
	fill(buf, 1000, 22, 0);
	NB_WRITE_ALL(data, buf, 1000);
	NB_READ_EXACT(ctl, b, TAGLEN);
	CHECK(!memcmp(b, "done", 4), "got \"%.8s\"", b);
	free(buf);
	SYS(close(data));
	SYS(close(ctl));
}
