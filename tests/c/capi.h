/* capi.h: shared scaffolding of the C API test programs in tests/c.
 *
 * Each program tests one family of socket calls with kernel TCP semantics as
 * the reference. It defines three functions:
 *
 *   setup(c)   creates the listeners (c->lfd[], c->port[]); runs before any
 *              client exists, so it may check "nothing pending" cases;
 *   server(c)  serves the client's connections;
 *   client(c)  connects to c->port[] and drives the test.
 *
 * and is run as
 *
 *   prog server PART        setup, print "PORTS p1 [p2...]", then server
 *   prog client PART p1...  client against those ports
 *   prog self PART          setup, server in a thread, client in the main thread
 *
 * PART selects a variant of the test ("-" for the default one). The program
 * exits 0 only when every check held; the first failed check prints
 * file:line, the role, what was expected and errno, and exits 1. A watchdog
 * (alarm) ends a stuck program with exit status 2.
 */
#ifndef CAPI_H
#define CAPI_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXL 4

struct ctx {
	const char *part; /* variant of the test, "-" when none */
	int self;         /* both roles in one process */
	int nl;           /* listeners (server side) or ports (client side) */
	int lfd[MAXL];
	int port[MAXL];
};

static void setup(struct ctx *c);
static void server(struct ctx *c);
static void client(struct ctx *c);

/* ---- reporting ---------------------------------------------------------- */

static __thread const char *role = "main";
static const char *prog_name = "capi";

/* failf reports a failed check and ends the program with status 1. */
static __attribute__((unused)) void failf(const char *file, int line, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5), noreturn));
static __attribute__((unused)) void failf(const char *file, int line, int err, const char *fmt, ...)
{
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "FAIL %s:%d [%s %s pid %d]: ", file, line, prog_name, role,
			 (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof buf - n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 64)
		n = sizeof buf - 64;
	n += snprintf(buf + n, sizeof buf - n, " (errno %d: %s)\n", err, err ? strerror(err) : "none");
	fflush(stdout);
	ssize_t w = write(2, buf, n);
	(void)w;
	exit(1);
}

#define FAIL(...) failf(__FILE__, __LINE__, errno, __VA_ARGS__)

/* CHECK(cond, fmt, ...): cond must hold. */
#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		int e_ = errno;                                                       \
		if (!(cond)) {                                                        \
			char m_[512];                                                 \
			snprintf(m_, sizeof m_, __VA_ARGS__);                         \
			failf(__FILE__, __LINE__, e_, "expected %s: %s", #cond, m_);  \
		}                                                                     \
	} while (0)

/* SYS(expr): a call that must not fail (result >= 0); yields its result. */
#define SYS(expr)                                                                     \
	({                                                                            \
		errno = 0;                                                            \
		long r_ = (long)(expr);                                               \
		if (r_ < 0)                                                           \
			failf(__FILE__, __LINE__, errno, "%s failed with %ld", #expr, r_); \
		r_;                                                                   \
	})

/* EQ(a, b): two integers must be equal. */
#define EQ(a, b)                                                                      \
	do {                                                                          \
		int e_ = errno;                                                       \
		long long a_ = (long long)(a), b_ = (long long)(b);                   \
		if (a_ != b_)                                                         \
			failf(__FILE__, __LINE__, e_, "expected %s == %s: got %lld, want %lld", \
			      #a, #b, a_, b_);                                        \
	} while (0)

/* ERR(expr, want): a call that must fail with errno want. */
#define ERR(expr, want)                                                               \
	do {                                                                          \
		errno = 0;                                                            \
		long r_ = (long)(expr);                                               \
		int e_ = errno;                                                       \
		if (r_ != -1 || e_ != (want))                                         \
			failf(__FILE__, __LINE__, e_, "expected %s to fail with %s (%d): got %ld", \
			      #expr, #want, (want), r_);                              \
	} while (0)

/* ---- time and the watchdog ------------------------------------------------ */

static __attribute__((unused)) int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static __attribute__((unused)) void on_watchdog(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: watchdog expired: the test program is stuck\n";
	ssize_t w = write(2, m, sizeof m - 1);
	(void)w;
	_exit(2);
}

/* watchdog (re)arms the alarm that ends a stuck program. */
static __attribute__((unused)) void watchdog(unsigned sec)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_watchdog;
	sigaction(SIGALRM, &sa, NULL);
	alarm(sec);
}

#define WATCHDOG_SEC 40

/* ---- signals --------------------------------------------------------------- */

/* catch_signal installs handler h for sig, with SA_RESTART when restart. */
static __attribute__((unused)) void catch_signal(int sig, void (*h)(int), int restart)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sa.sa_flags = restart ? SA_RESTART : 0;
	SYS(sigaction(sig, &sa, NULL));
}

/* mask_signal blocks (how SIG_BLOCK) or unblocks (SIG_UNBLOCK) sig in the
 * calling thread; a thread it creates is born with its mask. */
static __attribute__((unused)) void mask_signal(int how, int sig)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	pthread_sigmask(how, &s, NULL);
}

/* alarm_in_ms sends the process SIGALRM once, ms from now. */
static __attribute__((unused)) void alarm_in_ms(long ms)
{
	struct itimerval it = { .it_value = { .tv_sec = ms / 1000, .tv_usec = ms % 1000 * 1000 } };
	SYS(setitimer(ITIMER_REAL, &it, NULL));
}

/* ---- data ----------------------------------------------------------------- */

/* pat is the byte at offset off of the stream with the given seed: both ends
 * can produce and check any stretch of it. */
static inline uint8_t pat(uint32_t seed, uint64_t off)
{
	uint64_t x = (off + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 32 | seed);
	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (uint8_t)x;
}

static __attribute__((unused)) void fill(uint8_t *b, size_t n, uint32_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(seed, off + i);
}

#define VERIFY(b, n, seed, off)                                                        \
	do {                                                                           \
		const uint8_t *b_ = (const uint8_t *)(b);                              \
		size_t n_ = (n);                                                       \
		uint64_t o_ = (off);                                                   \
		for (size_t i_ = 0; i_ < n_; i_++)                                     \
			if (b_[i_] != pat((seed), o_ + i_))                            \
				failf(__FILE__, __LINE__, 0,                           \
				      "stream %u byte %llu: got 0x%02x, want 0x%02x",  \
				      (unsigned)(seed), (unsigned long long)(o_ + i_), \
				      b_[i_], pat((seed), o_ + i_));                   \
	} while (0)

static __attribute__((unused)) uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s ? *s : 88172645463325252ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* ---- blocking I/O helpers --------------------------------------------------- */

#define WRITE_ALL(fd, b, n) write_all(__FILE__, __LINE__, fd, b, n)
static __attribute__((unused)) void write_all(const char *file, int line, int fd, const void *b, size_t n)
{
	const char *p = b;
	while (n > 0) {
		errno = 0;
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			failf(file, line, errno, "write(fd %d, %zu bytes) returned %zd", fd, n, w);
		p += w;
		n -= (size_t)w;
	}
}

#define READ_EXACT(fd, b, n) read_exact(__FILE__, __LINE__, fd, b, n)
static __attribute__((unused)) void read_exact(const char *file, int line, int fd, void *b, size_t n)
{
	char *p = b;
	size_t want = n;
	while (n > 0) {
		errno = 0;
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			failf(file, line, errno, "read(fd %d) failed after %zu of %zu bytes", fd, want - n, want);
		if (r == 0)
			failf(file, line, 0, "read(fd %d): end of stream after %zu of %zu bytes", fd, want - n, want);
		p += r;
		n -= (size_t)r;
	}
}

/* RECV_WHOLE receives n bytes into b by blocking recv(MSG_WAITALL), which
 * returns them in one call unless a signal cuts it short; intr: a call that
 * fails with EINTR is repeated, else that is a failure too. */
#define RECV_WHOLE(fd, b, n, intr) recv_whole(__FILE__, __LINE__, fd, b, n, intr)
static __attribute__((unused)) void recv_whole(const char *file, int line, int fd, uint8_t *b, size_t n, int intr)
{
	size_t got = 0;
	while (got < n) {
		errno = 0;
		ssize_t r = recv(fd, b + got, n - got, MSG_WAITALL);
		if (r < 0 && errno == EINTR && intr)
			continue;
		if (r <= 0)
			failf(file, line, errno, "recv after %zu of %zu bytes returned %zd", got, n, r);
		got += (size_t)r;
	}
}

/* SEND_WHOLE sends n bytes of b in one blocking send() and writes the rest
 * when a signal cut it short; intr: a send that fails with EINTR counts as
 * one that sent nothing, else that is a failure. */
#define SEND_WHOLE(fd, b, n, intr) send_whole(__FILE__, __LINE__, fd, b, n, intr)
static __attribute__((unused)) void send_whole(const char *file, int line, int fd, const uint8_t *b, size_t n, int intr)
{
	errno = 0;
	ssize_t w = send(fd, b, n, 0);
	if (w < 0 && errno == EINTR && intr)
		w = 0;
	if (w < 0)
		failf(file, line, errno, "send of %zu bytes returned %zd", n, w);
	if ((size_t)w < n)
		write_all(file, line, fd, b + w, n - (size_t)w);
}

/* serve_commands answers one-byte commands on fd until 'C': 'S' sends the
 * next chunk bytes of the seeded pattern in one write. */
#define SERVE_COMMANDS(fd, chunk, seed) serve_commands(__FILE__, __LINE__, fd, chunk, seed)
static __attribute__((unused)) void serve_commands(const char *file, int line, int fd, size_t chunk, uint32_t seed)
{
	uint8_t buf[4096];
	uint64_t off = 0;
	if (chunk > sizeof buf)
		failf(file, line, 0, "chunk of %zu bytes is more than %zu", chunk, sizeof buf);
	for (;;) {
		char cmd;
		read_exact(file, line, fd, &cmd, 1);
		if (cmd == 'C')
			return;
		if (cmd != 'S')
			failf(file, line, 0, "unknown command %d", cmd);
		fill(buf, chunk, seed, off);
		write_all(file, line, fd, buf, chunk);
		off += chunk;
	}
}

/* SEND_PAT / RECV_PAT move n bytes of the seeded pattern from offset off. */
#define SEND_PAT(fd, n, seed, off) send_pat(__FILE__, __LINE__, fd, n, seed, off)
static __attribute__((unused)) void send_pat(const char *file, int line, int fd, size_t n, uint32_t seed, uint64_t off)
{
	uint8_t buf[65536];
	while (n > 0) {
		size_t k = n < sizeof buf ? n : sizeof buf;
		fill(buf, k, seed, off);
		write_all(file, line, fd, buf, k);
		n -= k;
		off += k;
	}
}

#define RECV_PAT(fd, n, seed, off) recv_pat(__FILE__, __LINE__, fd, n, seed, off)
static __attribute__((unused)) void recv_pat(const char *file, int line, int fd, size_t n, uint32_t seed, uint64_t off)
{
	uint8_t buf[65536];
	while (n > 0) {
		size_t k = n < sizeof buf ? n : sizeof buf;
		read_exact(file, line, fd, buf, k);
		for (size_t i = 0; i < k; i++)
			if (buf[i] != pat(seed, off + i))
				failf(file, line, 0, "stream %u byte %llu: got 0x%02x, want 0x%02x", (unsigned)seed,
				      (unsigned long long)(off + i), buf[i], pat(seed, off + i));
		n -= k;
		off += k;
	}
}

/* EXPECT_EOF: the next read returns 0 (end of stream). */
#define EXPECT_EOF(fd)                                                                 \
	do {                                                                           \
		char c_;                                                               \
		ssize_t r_;                                                            \
		do {                                                                   \
			errno = 0;                                                     \
			r_ = read((fd), &c_, 1);                                       \
		} while (r_ < 0 && errno == EINTR);                                    \
		if (r_ != 0)                                                           \
			failf(__FILE__, __LINE__, errno,                               \
			      "expected end of stream on fd %d: read returned %zd", (fd), r_); \
	} while (0)

/* SEND_TAG / EXPECT_TAG exchange short fixed-size control messages. */
#define TAGLEN 8
#define SEND_TAG(fd, tag)                                                              \
	do {                                                                           \
		char t_[TAGLEN] = { 0 };                                               \
		strncpy(t_, (tag), TAGLEN);                                            \
		write_all(__FILE__, __LINE__, (fd), t_, TAGLEN);                       \
	} while (0)
#define EXPECT_TAG(fd, tag)                                                            \
	do {                                                                           \
		char t_[TAGLEN] = { 0 }, g_[TAGLEN + 1] = { 0 };                      \
		strncpy(t_, (tag), TAGLEN);                                            \
		read_exact(__FILE__, __LINE__, (fd), g_, TAGLEN);                      \
		if (memcmp(t_, g_, TAGLEN))                                            \
			failf(__FILE__, __LINE__, 0, "expected message \"%s\", got \"%.8s\"", \
			      (tag), g_);                                              \
	} while (0)

/* ---- addresses ---------------------------------------------------------------- */

static __attribute__((unused)) socklen_t mkaddr(struct sockaddr_storage *ss, int family, const char *ip, int port)
{
	memset(ss, 0, sizeof *ss);
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		if (inet_pton(AF_INET, ip, &a->sin_addr) != 1)
			FAIL("bad IPv4 address %s", ip);
		return sizeof *a;
	}
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
	a->sin6_family = AF_INET6;
	a->sin6_port = htons(port);
	if (inet_pton(AF_INET6, ip, &a->sin6_addr) != 1)
		FAIL("bad IPv6 address %s", ip);
	return sizeof *a;
}

static __attribute__((unused)) int sa_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return -1;
}

static __attribute__((unused)) const char *sa_ip(const struct sockaddr_storage *ss, char *buf, size_t n)
{
	const void *src = ss->ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
						   : (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (!inet_ntop(ss->ss_family, src, buf, n))
		snprintf(buf, n, "family %d", ss->ss_family);
	return buf;
}

static __attribute__((unused)) int local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof ss;
	SYS(getsockname(fd, (struct sockaddr *)&ss, &l));
	return sa_port(&ss);
}

static __attribute__((unused)) int peer_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof ss;
	SYS(getpeername(fd, (struct sockaddr *)&ss, &l));
	return sa_port(&ss);
}

/* The SDP port of application port p with libsdp's default offset. */
static __attribute__((unused)) int sdp_port_of(int p)
{
	const int span = 65536 - 1024;
	return ((p - 1024 + 20000) % span + span) % span + 1024;
}

/* listen_on binds a stream socket of family to ip with a kernel-chosen port
 * whose SDP port is free too (so a preloaded listener gets its SDP
 * listener), listens and returns it; *port is the port. */
static __attribute__((unused)) int listen_on(int family, const char *ip, int v6only, int *port)
{
	for (int attempt = 0; attempt < 50; attempt++) {
		int fd = SYS(socket(family, SOCK_STREAM, 0));
		int one = 1;
		SYS(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
		if (family == AF_INET6)
			SYS(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only));
		struct sockaddr_storage ss;
		socklen_t l = mkaddr(&ss, family, ip, 0);
		SYS(bind(fd, (struct sockaddr *)&ss, l));
		int p = local_port(fd);
		/* The SDP port must be free as well. */
		int probe = SYS(socket(family, SOCK_STREAM, 0));
		if (family == AF_INET6)
			SYS(setsockopt(probe, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only));
		l = mkaddr(&ss, family, ip, sdp_port_of(p));
		int busy = bind(probe, (struct sockaddr *)&ss, l) < 0;
		close(probe);
		if (busy) {
			close(fd);
			continue;
		}
		SYS(listen(fd, 64));
		*port = p;
		return fd;
	}
	FAIL("no port P with P and its SDP port free on %s", ip);
}

static __attribute__((unused)) int listen4(int *port) { return listen_on(AF_INET, "127.0.0.1", 0, port); }

static __attribute__((unused)) int connect_to(int family, const char *ip, int port, int type_flags)
{
	int fd = SYS(socket(family, SOCK_STREAM | type_flags, 0));
	struct sockaddr_storage ss;
	socklen_t l = mkaddr(&ss, family, ip, port);
	if (connect(fd, (struct sockaddr *)&ss, l) < 0)
		FAIL("connect to %s port %d", ip, port);
	return fd;
}

static __attribute__((unused)) int connect4(int port) { return connect_to(AF_INET, "127.0.0.1", port, 0); }

/* accept_one accepts on lfd, waiting at most 10 s. */
#define ACCEPT(lfd) accept_one(__FILE__, __LINE__, lfd)
static __attribute__((unused)) int accept_one(const char *file, int line, int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	int r;
	do {
		r = poll(&p, 1, 10000);
	} while (r < 0 && errno == EINTR);
	if (r != 1)
		failf(file, line, errno, "no connection to accept on fd %d within 10 s (poll %d)", lfd, r);
	int c;
	do {
		c = accept(lfd, NULL, NULL);
	} while (c < 0 && errno == EINTR);
	if (c < 0)
		failf(file, line, errno, "accept on fd %d", lfd);
	return c;
}

/* atmark reports whether the reader stands at the urgent mark (SIOCATMARK). */
static __attribute__((unused)) int atmark(int fd)
{
	int v = -1;
	SYS(ioctl(fd, SIOCATMARK, &v));
	return v;
}

static __attribute__((unused)) void set_nonblock(int fd, int on)
{
	int fl = SYS(fcntl(fd, F_GETFL));
	SYS(fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK));
}

/* wait_fd polls one descriptor for events, at most ms; returns revents. */
static __attribute__((unused)) short wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int64_t end = now_ms() + ms;
	for (;;) {
		int left = (int)(end - now_ms());
		if (left < 0)
			left = 0;
		int r = poll(&p, 1, left);
		if (r >= 0)
			return r ? p.revents : 0;
		if (errno != EINTR)
			FAIL("poll(fd %d)", fd);
	}
}

/* ---- main ---------------------------------------------------------------------- */

static struct ctx *server_ctx;

static void *server_thread(void *arg)
{
	(void)arg;
	role = "server";
	/* Asynchronous signals go to the client (main) thread. */
	mask_signal(SIG_BLOCK, SIGALRM);
	server(server_ctx);
	return NULL;
}

static __attribute__((unused)) void print_ports(struct ctx *c)
{
	printf("PORTS");
	for (int i = 0; i < c->nl; i++)
		printf(" %d", c->port[i]);
	printf("\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *slash = strrchr(argv[0], '/');
	prog_name = slash ? slash + 1 : argv[0];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: %s server PART | client PART PORT... | self PART\n", prog_name);
		return 64;
	}
	watchdog(WATCHDOG_SEC);
	struct ctx c;
	memset(&c, 0, sizeof c);
	c.part = argv[2];
	if (!strcmp(argv[1], "server")) {
		role = "server";
		setup(&c);
		print_ports(&c);
		server(&c);
	} else if (!strcmp(argv[1], "client")) {
		role = "client";
		for (int i = 3; i < argc && c.nl < MAXL; i++)
			c.port[c.nl++] = atoi(argv[i]);
		client(&c);
	} else if (!strcmp(argv[1], "self")) {
		c.self = 1;
		role = "server";
		setup(&c);
		struct ctx cc = c;
		server_ctx = &c;
		pthread_t th;
		if (pthread_create(&th, NULL, server_thread, NULL))
			FAIL("pthread_create");
		role = "client";
		client(&cc);
		pthread_join(th, NULL);
	} else {
		fprintf(stderr, "%s: unknown mode %s\n", prog_name, argv[1]);
		return 64;
	}
	printf("ok %s %s %s\n", prog_name, argv[1], c.part);
	return 0;
}

#endif
