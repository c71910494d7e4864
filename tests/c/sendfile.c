/* sendfile.c: sendfile from a regular file to a connected socket, with an
 * offset pointer (the file position stays) and without one (the file
 * position advances). One connection. */
#include "capi.h"
#include <sys/sendfile.h>

#define FSIZE ((8u << 20) + 123)

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void server(struct ctx *c)
{
	const char *tmp = getenv("TMPDIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/capi-sendfile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int f = SYS(mkstemp(path));
	SYS(unlink(path));
	uint8_t *buf = malloc(FSIZE);
	CHECK(buf != NULL, "malloc");
	fill(buf, FSIZE, 81, 0);
	WRITE_ALL(f, buf, FSIZE);
	free(buf);
	SYS(lseek(f, 0, SEEK_SET));

	int fd = ACCEPT(c->lfd[0]);
	EXPECT_TAG(fd, "ready");
	/* With an offset: the whole file; the file position does not move. */
	off_t off = 0;
	for (int i = 0; i < 100000 && off < (off_t)FSIZE; i++) {
		ssize_t n = sendfile(fd, f, &off, FSIZE - (size_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		CHECK(n > 0, "sendfile at offset %lld returned %zd", (long long)off, n);
	}
	EQ(off, FSIZE);
	EQ(lseek(f, 0, SEEK_CUR), 0);
	/* Without: bytes 1000..5999 from the file position, which advances. */
	SYS(lseek(f, 1000, SEEK_SET));
	size_t left = 5000;
	for (int i = 0; i < 100000 && left > 0; i++) {
		ssize_t n = sendfile(fd, f, NULL, left);
		if (n < 0 && errno == EINTR)
			continue;
		CHECK(n > 0, "sendfile without offset returned %zd", n);
		left -= (size_t)n;
	}
	EQ(left, 0);
	EQ(lseek(f, 0, SEEK_CUR), 6000);
	SYS(close(f));
	SYS(close(fd));
	SYS(close(c->lfd[0]));
}

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	SEND_TAG(fd, "ready");
	RECV_PAT(fd, FSIZE, 81, 0);
	RECV_PAT(fd, 5000, 81, 1000);
	EXPECT_EOF(fd);
	SYS(close(fd));
}
