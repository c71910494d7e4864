/* fork.c: servers that fork.
 *
 * PART "prefork": the parent listens and accepts one connection, then forks
 * worker A, which serves that connection, and worker B, which accepts and
 * serves the next one itself; once both exited the parent serves a third
 * connection. The parent does no I/O on a connection before forking. Three
 * connections.
 *
 * PART "afterio": the parent serves a connection (I/O), then forks a child
 * that closes its inherited copy of that connection, connects to the
 * parent's listener and exchanges data on this new connection; the first
 * connection goes on undisturbed. The client makes one connection. */
#include "capi.h"

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

/* serve echoes 256 KiB of stream seed on fd. */
static void serve(int fd, uint32_t seed)
{
	RECV_PAT(fd, 256 << 10, seed, 0);
	SEND_PAT(fd, 256 << 10, seed + 100, 0);
	EXPECT_EOF(fd);
	SYS(close(fd));
}

static void use(int fd, uint32_t seed)
{
	SEND_PAT(fd, 256 << 10, seed, 0);
	RECV_PAT(fd, 256 << 10, seed + 100, 0);
}

static void reap(pid_t pid, const char *what)
{
	int st;
	pid_t r;
	do {
		r = waitpid(pid, &st, 0);
	} while (r < 0 && errno == EINTR);
	CHECK(r == pid, "waitpid %s", what);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exited with status 0x%x", what, st);
}

static void server_prefork(struct ctx *c)
{
	int lfd = c->lfd[0];
	int a = ACCEPT(lfd);
	pid_t wa = SYS(fork());
	if (wa == 0) {
		role = "worker-a";
		watchdog(WATCHDOG_SEC);
		SYS(close(lfd));
		serve(a, 91);
		exit(0);
	}
	SYS(close(a));
	pid_t wb = SYS(fork());
	if (wb == 0) {
		role = "worker-b";
		watchdog(WATCHDOG_SEC);
		int b = ACCEPT(lfd);
		SYS(close(lfd));
		serve(b, 92);
		exit(0);
	}
	reap(wa, "worker A");
	reap(wb, "worker B");
	/* Tell the client the workers are done, on a third connection. */
	int d = ACCEPT(lfd);
	serve(d, 93);
	SYS(close(lfd));
}

static void client_prefork(struct ctx *c)
{
	int a = connect4(c->port[0]);
	int b = connect4(c->port[0]);
	use(a, 91);
	use(b, 92);
	SYS(close(a));
	SYS(close(b));
	int d = connect4(c->port[0]);
	use(d, 93);
	SYS(close(d));
}

static void server_afterio(struct ctx *c)
{
	int lfd = c->lfd[0];
	int a = ACCEPT(lfd);
	RECV_PAT(a, 64 << 10, 94, 0);
	SEND_PAT(a, 64 << 10, 95, 0);
	fflush(stdout);
	pid_t ch = SYS(fork());
	if (ch == 0) {
		role = "child";
		watchdog(WATCHDOG_SEC);
		/* Closing the inherited copy must not end the parent's connection. */
		SYS(close(a));
		int n = connect4(c->port[0]);
		use(n, 96);
		SYS(close(n));
		exit(0);
	}
	int n = ACCEPT(lfd);
	serve(n, 96);
	reap(ch, "child");
	/* The first connection is still up, in both directions. */
	SEND_TAG(a, "again");
	RECV_PAT(a, 64 << 10, 97, 0);
	SEND_PAT(a, 64 << 10, 98, 0);
	EXPECT_EOF(a);
	SYS(close(a));
	SYS(close(lfd));
}

static void client_afterio(struct ctx *c)
{
	int a = connect4(c->port[0]);
	SEND_PAT(a, 64 << 10, 94, 0);
	RECV_PAT(a, 64 << 10, 95, 0);
	EXPECT_TAG(a, "again");
	SEND_PAT(a, 64 << 10, 97, 0);
	RECV_PAT(a, 64 << 10, 98, 0);
	SYS(close(a));
}

static void server(struct ctx *c)
{
	if (!strcmp(c->part, "afterio"))
		server_afterio(c);
	else
		server_prefork(c);
}

static void client(struct ctx *c)
{
	if (!strcmp(c->part, "afterio"))
		client_afterio(c);
	else
		client_prefork(c);
}
