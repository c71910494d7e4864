/* execpass.c: a connection handed to an exec'd program (the sshd pattern).
 *
 * The server accepts one connection without doing any I/O on it, forks, and
 * the child dup2()s the socket onto descriptors 0 and 1 and execs
 * /bin/sh -c 'read line; echo got:$line'. The parent closes its copy and
 * waits for the child. The client sends "ping\n" and must read exactly
 * "got:ping\n" followed by the end of the stream. One connection. */
#include "capi.h"

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void server(struct ctx *c)
{
	int lfd = c->lfd[0];
	int fd = ACCEPT(lfd);
	fflush(stdout);
	pid_t ch = SYS(fork());
	if (ch == 0) {
		role = "child";
		SYS(close(lfd));
		SYS(dup2(fd, 0));
		SYS(dup2(fd, 1));
		SYS(close(fd));
		execl("/bin/sh", "sh", "-c", "read line; echo got:$line", (char *)NULL);
		FAIL("execl /bin/sh");
	}
	SYS(close(fd));
	int st;
	pid_t r;
	do {
		r = waitpid(ch, &st, 0);
	} while (r < 0 && errno == EINTR);
	CHECK(r == ch, "waitpid returned %d", (int)r);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the shell exited with status 0x%x", st);
	SYS(close(lfd));
}

static void client(struct ctx *c)
{
	int fd = connect4(c->port[0]);
	WRITE_ALL(fd, "ping\n", 5);
	char buf[64];
	size_t got = 0;
	for (;;) {
		CHECK(got < sizeof buf, "at most %zu bytes (got %zu: \"%.*s\")", sizeof buf, got, (int)got, buf);
		ssize_t r = read(fd, buf + got, sizeof buf - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			FAIL("read after %zu bytes", got);
		if (r == 0)
			break;
		got += (size_t)r;
	}
	CHECK(got == 9 && !memcmp(buf, "got:ping\n", 9), "exactly \"got:ping\\n\" then end of stream, got %zu bytes: \"%.*s\"",
	      got, (int)got, buf);
	SYS(close(fd));
}
