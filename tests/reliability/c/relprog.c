/* relprog.c: the program the reliability tests run under libsdp, in one of
 * several roles (argv[1]):
 *
 *   sink [PORT [ADDR]]        listen, print "PORTS p", then for each connection
 *                             (a thread each) read a 16-byte header {seed,
 *                             total} and the pattern stream, checking every
 *                             byte as it arrives; print one DONE line per
 *                             connection:  DONE ok bytes=N | DONE short
 *                             bytes=N total=T | DONE err=ENAME bytes=N
 *                             next=(what the next read says) |
 *                             DONE corrupt at=N; answer a whole stream with an
 *                             8-byte count. Runs until killed.
 *   send HOST PORT BYTES CONNS SEED [KIBPS]
 *                             CONNS connections one after another, each
 *                             sending BYTES of the pattern (at most KIBPS KiB/s
 *                             when given); one line each: SENT i ok bytes=N |
 *                             SENT i err=ENAME sent=N
 *   retry HOST PORT BYTES CONNS SEED
 *                             like send, but a refused connect is retried
 *                             (every 50 ms, for at most 30 s)
 *   echo [PORT [ADDR]]        an epoll echo server; print "PORTS p"; one line
 *                             per connection that ends with an error:
 *                             CLOSED err=ENAME. Runs until killed.
 *   echocli HOST PORT ROUNDS  ROUNDS connections, each echoing 1 KiB; prints
 *                             "ECHO ok N" or fails (exit 1)
 *   hold HOST PORT N          opens N connections with epoll (200 at a time),
 *                             each echoing 16 bytes; prints "STAGE k" at 100
 *                             and at N connections and waits for a line on
 *                             stdin before going on; then echoes once more on
 *                             every connection, prints "ALIVE N" and exits
 *   soak HOST PORT CYCLES BYTES
 *                             CYCLES times connect, send BYTES, read them
 *                             back, check, close; prints "AT i fds=F rss=KiB"
 *                             ten times and "SOAK ok CYCLES" at the end
 *
 * Every role raises RLIMIT_NOFILE to its hard limit and ignores SIGPIPE. A
 * check that fails prints "FAIL ..." and exits 1; a watchdog (alarm, 600 s)
 * ends a stuck program. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
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
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FAIL(...)                                                          \
	do {                                                               \
		int e_ = errno;                                            \
		fprintf(stdout, "FAIL %s:%d: ", __FILE__, __LINE__);       \
		fprintf(stdout, __VA_ARGS__);                              \
		fprintf(stdout, " (errno %s)\n", ename(e_));               \
		fflush(stdout);                                            \
		exit(1);                                                   \
	} while (0)
#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			FAIL("%s", #c);   \
	} while (0)

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *ename(int e)
{
	const char *n = e ? strerrorname_np(e) : "none";
	return n ? n : "EUNKNOWN";
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&out_mu);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	pthread_mutex_unlock(&out_mu);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- the pattern: byte i of the stream with seed s ---------------------- */

static inline uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline uint8_t pat(uint64_t seed, uint64_t i)
{
	return (uint8_t)(mix(seed ^ (i >> 3) * 0x100000001b3ULL) >> ((i & 7) * 8));
}

static void fill(uint64_t seed, uint64_t off, uint8_t *b, size_t n)
{
	for (size_t k = 0; k < n; k++)
		b[k] = pat(seed, off + k);
}

/* mismatch returns the index of the first byte that differs, or -1. */
static long mismatch(uint64_t seed, uint64_t off, const uint8_t *b, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (b[k] != pat(seed, off + k))
			return (long)k;
	return -1;
}

/* ---- sockets ------------------------------------------------------------- */

static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *s4 = (void *)ss;
	struct sockaddr_in6 *s6 = (void *)ss;
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		*len = sizeof *s4;
		return AF_INET;
	}
	if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		*len = sizeof *s6;
		return AF_INET6;
	}
	FAIL("bad address %s", host);
}

static int listen_on(int port, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fam = resolve(addr ? addr : "127.0.0.1", port, &ss, &len);
	int l = socket(fam, SOCK_STREAM, 0);
	CHECK(l >= 0);
	int one = 1;
	CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
	CHECK(bind(l, (struct sockaddr *)&ss, len) == 0);
	CHECK(listen(l, 4096) == 0);
	CHECK(getsockname(l, (struct sockaddr *)&ss, &len) == 0);
	say("PORTS %d", ntohs(((struct sockaddr_in *)&ss)->sin_port));
	return l;
}

/* dial connects a blocking socket; retry_ms > 0 retries a refused connect. */
static int dial(const char *host, int port, int retry_ms)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fam = resolve(host, port, &ss, &len);
	int64_t end = now_ms() + retry_ms;
	for (;;) {
		int s = socket(fam, SOCK_STREAM, 0);
		CHECK(s >= 0);
		if (connect(s, (struct sockaddr *)&ss, len) == 0)
			return s;
		int e = errno;
		close(s);
		if (e != ECONNREFUSED || now_ms() >= end) {
			errno = e;
			return -1;
		}
		sleep_ms(50);
	}
}

static int write_all(int fd, const void *b, size_t n)
{
	for (size_t o = 0; o < n;) {
		ssize_t w = write(fd, (const char *)b + o, n - o);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		o += (size_t)w;
	}
	return 0;
}

/* read_full reads n bytes; returns n, the count before EOF, or -1. */
static ssize_t read_full(int fd, void *b, size_t n)
{
	size_t o = 0;
	while (o < n) {
		ssize_t r = read(fd, (char *)b + o, n - o);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		o += (size_t)r;
	}
	return (ssize_t)o;
}

/* ---- sink ---------------------------------------------------------------- */

#define CHUNK (256 * 1024)

static void *sink_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint8_t *buf = malloc(CHUNK);
	CHECK(buf);
	uint64_t hdr[2];
	ssize_t h = read_full(fd, hdr, sizeof hdr);
	if (h != (ssize_t)sizeof hdr) {
		if (h < 0) {
			/* As below: an error can meet the header's read too (an
			 * engine fault in the connection's first call). */
			int e = errno;
			ssize_t r2 = read(fd, buf, CHUNK);
			say("DONE err=%s bytes=0 next=%s", ename(e), r2 < 0 ? ename(errno) : r2 == 0 ? "EOF" : "data");
		} else {
			say("DONE short bytes=0 total=16");
		}
		goto out;
	}
	uint64_t seed = hdr[0], total = hdr[1], got = 0, next_progress = 4 << 20;
	for (;;) {
		ssize_t r = read(fd, buf, CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			/* What the next read says after the error (TCP: 0, end of stream). */
			int e = errno;
			ssize_t r2 = read(fd, buf, CHUNK);
			say("DONE err=%s bytes=%llu next=%s", ename(e), (unsigned long long)got,
			    r2 < 0 ? ename(errno) : r2 == 0 ? "EOF" : "data");
			goto out;
		}
		if (r == 0)
			break;
		long bad = mismatch(seed, got, buf, (size_t)r);
		if (bad >= 0) {
			say("DONE corrupt at=%llu", (unsigned long long)(got + (uint64_t)bad));
			goto out;
		}
		got += (uint64_t)r;
		if (got >= next_progress) {
			say("PROGRESS bytes=%llu", (unsigned long long)got);
			next_progress += 4 << 20;
		}
	}
	if (got != total) {
		say("DONE short bytes=%llu total=%llu", (unsigned long long)got, (unsigned long long)total);
		goto out;
	}
	/* The answer first: a test that kills the sink after N DONE lines cuts
	 * the stream in progress, not the answer of the last whole one. */
	(void)write_all(fd, &got, sizeof got);
	say("DONE ok bytes=%llu", (unsigned long long)got);
out:
	free(buf);
	close(fd);
	return NULL;
}

static int sink(int port, const char *addr)
{
	int l = listen_on(port, addr);
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			FAIL("accept");
		}
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		CHECK(pthread_create(&t, &a, sink_conn, (void *)(intptr_t)c) == 0);
		pthread_attr_destroy(&a);
	}
}

/* ---- send / retry -------------------------------------------------------- */

static int send_one(const char *host, int port, uint64_t bytes, uint64_t seed, int kibps, int retry_ms,
		    int i)
{
	int s = dial(host, port, retry_ms);
	if (s < 0) {
		say("SENT %d err=%s sent=0 connect", i, ename(errno));
		return -1;
	}
	uint8_t *buf = malloc(64 * 1024);
	CHECK(buf);
	uint64_t hdr[2] = { seed, bytes }, sent = 0;
	int64_t start = now_ms();
	if (write_all(s, hdr, sizeof hdr) < 0)
		goto fail;
	while (sent < bytes) {
		size_t n = bytes - sent < 64 * 1024 ? (size_t)(bytes - sent) : 64 * 1024;
		fill(seed, sent, buf, n);
		if (write_all(s, buf, n) < 0)
			goto fail;
		sent += n;
		if (kibps > 0) {
			int64_t due = start + (int64_t)(sent / 1024) * 1000 / kibps;
			int64_t now = now_ms();
			if (due > now)
				sleep_ms((int)(due - now));
		}
	}
	if (shutdown(s, SHUT_WR) < 0)
		goto fail;
	uint64_t ack = 0;
	ssize_t r = read_full(s, &ack, sizeof ack);
	if (r < 0)
		goto fail;
	if (r != (ssize_t)sizeof ack || ack != bytes) {
		say("SENT %d err=short-ack sent=%llu", i, (unsigned long long)sent);
		free(buf);
		close(s);
		return -1;
	}
	say("SENT %d ok bytes=%llu", i, (unsigned long long)sent);
	free(buf);
	close(s);
	return 0;
fail:
	say("SENT %d err=%s sent=%llu", i, ename(errno), (unsigned long long)sent);
	free(buf);
	close(s);
	return -1;
}

/* ---- echo server ----------------------------------------------------------- */

/* put writes all of b to the non-blocking fd, waiting at most 10 s. */
static int put(int fd, const uint8_t *b, size_t n)
{
	int64_t end = now_ms() + 10000;
	for (size_t o = 0; o < n;) {
		ssize_t w = write(fd, b + o, n - o);
		if (w > 0) {
			o += (size_t)w;
			continue;
		}
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			int left = (int)(end - now_ms());
			if (left <= 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			poll(&p, 1, left);
			continue;
		}
		return -1;
	}
	return 0;
}

static int echo(int port, const char *addr)
{
	int l = listen_on(port, addr);
	CHECK(fcntl(l, F_SETFL, O_NONBLOCK) == 0);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = l };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) == 0);
	static uint8_t buf[64 * 1024];
	struct epoll_event evs[256];
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		if (n < 0 && errno == EINTR)
			continue;
		CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == l) {
				for (int k = 0; k < 64; k++) {
					int c = accept4(l, NULL, NULL, SOCK_NONBLOCK);
					if (c < 0)
						break;
					struct epoll_event ce = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = c };
					CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) == 0);
				}
				continue;
			}
			for (int k = 0; k < 16; k++) {
				ssize_t r = read(fd, buf, sizeof buf);
				if (r < 0 && (errno == EAGAIN || errno == EINTR))
					break;
				if (r <= 0 || put(fd, buf, (size_t)r) < 0) {
					if (r < 0 || errno)
						say("CLOSED err=%s", r == 0 ? "EOF" : ename(errno));
					epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
					close(fd);
					break;
				}
				errno = 0;
			}
		}
	}
}

/* echo_once sends n pattern bytes on the blocking fd and checks the echo. */
static int echo_once(int fd, uint64_t seed, size_t n)
{
	uint8_t out[4096], in[4096];
	CHECK(n <= sizeof out);
	fill(seed, 0, out, n);
	if (write_all(fd, out, n) < 0)
		return -1;
	if (read_full(fd, in, n) != (ssize_t)n)
		return -1;
	return memcmp(in, out, n) == 0 ? 0 : -2;
}

static int echocli(const char *host, int port, int rounds)
{
	for (int i = 0; i < rounds; i++) {
		int s = dial(host, port, 0);
		if (s < 0)
			FAIL("connect %d", i);
		int r = echo_once(s, (uint64_t)i, 1024);
		if (r == -2)
			FAIL("round %d: echo differs", i);
		if (r < 0)
			FAIL("round %d", i);
		close(s);
	}
	say("ECHO ok %d", rounds);
	return 0;
}

/* ---- resources of this process ------------------------------------------------ */

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	if (d)
		closedir(d);
	return n - 1; /* the directory's own descriptor */
}

/* ---- hold: many connections at once, with epoll --------------------------------- */

static void wait_stdin(void)
{
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return;
}

/* echo_batch sends 16 bytes on each of fds[0..n) and waits, with epoll, for
 * each echo. */
static void echo_batch(int ep, int *fds, int n, uint64_t round)
{
	uint8_t out[16], in[16];
	for (int i = 0; i < n; i++) {
		fill(round * 1000003u + (uint64_t)fds[i], 0, out, sizeof out);
		if (put(fds[i], out, sizeof out) < 0)
			FAIL("send on connection %d of the batch", i);
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = fds[i] };
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) == 0);
	}
	int left = n;
	int64_t end = now_ms() + 60000;
	struct epoll_event evs[256];
	while (left > 0) {
		int k = epoll_wait(ep, evs, 256, 1000);
		if (k < 0 && errno == EINTR)
			continue;
		CHECK(k >= 0);
		if (now_ms() > end)
			FAIL("%d echoes missing after 60 s", left);
		for (int j = 0; j < k; j++) {
			int fd = evs[j].data.fd;
			ssize_t r = recv(fd, in, sizeof in, MSG_PEEK);
			if (r < 0 && errno == EAGAIN)
				continue;
			if (r < (ssize_t)sizeof in) {
				if (r <= 0)
					FAIL("connection fd %d ended (%zd)", fd, r);
				continue;
			}
			CHECK(recv(fd, in, sizeof in, 0) == (ssize_t)sizeof in);
			fill(round * 1000003u + (uint64_t)fd, 0, out, sizeof out);
			if (memcmp(in, out, sizeof in) != 0)
				FAIL("fd %d: echo differs", fd);
			CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0);
			left--;
		}
	}
}

static int hold(const char *host, int port, int n)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fam = resolve(host, port, &ss, &len);
	int *fds = calloc((size_t)n, sizeof *fds);
	CHECK(fds);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	int have = 0, stage = n < 100 ? n : 100;
	while (have < n) {
		int b = n - have < 200 ? n - have : 200;
		if (have < stage && have + b > stage)
			b = stage - have;
		for (int i = 0; i < b; i++) {
			int s = socket(fam, SOCK_STREAM | SOCK_NONBLOCK, 0);
			if (s < 0)
				FAIL("socket for connection %d", have + i);
			if (connect(s, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
				FAIL("connect %d", have + i);
			fds[have + i] = s;
		}
		/* Wait until every connect of the batch is done, with epoll. */
		for (int i = 0; i < b; i++) {
			struct epoll_event ev = { .events = EPOLLOUT, .data.fd = fds[have + i] };
			CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fds[have + i], &ev) == 0);
		}
		int pending = b;
		int64_t end = now_ms() + 60000;
		struct epoll_event evs[256];
		while (pending > 0) {
			int k = epoll_wait(ep, evs, 256, 1000);
			if (k < 0 && errno == EINTR)
				continue;
			CHECK(k >= 0);
			if (now_ms() > end)
				FAIL("%d connects pending after 60 s", pending);
			for (int j = 0; j < k; j++) {
				int err = 0;
				socklen_t el = sizeof err;
				CHECK(getsockopt(evs[j].data.fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0);
				if (err) {
					errno = err;
					FAIL("connect fd %d", evs[j].data.fd);
				}
				CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, evs[j].data.fd, NULL) == 0);
				pending--;
			}
		}
		echo_batch(ep, fds + have, b, 0);
		have += b;
		if (have == stage) {
			say("STAGE %d rss=%ld fds=%d", have, rss_kib(), fd_count());
			wait_stdin();
			stage = n;
		}
	}
	for (int i = 0; i < n; i += 200)
		echo_batch(ep, fds + i, n - i < 200 ? n - i : 200, 1);
	say("ALIVE %d", n);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	return 0;
}

/* ---- soak ------------------------------------------------------------------------ */

static int soak(const char *host, int port, int cycles, size_t bytes)
{
	uint8_t *out = malloc(bytes), *in = malloc(bytes);
	CHECK(out && in);
	int step = cycles >= 10 ? cycles / 10 : 1;
	for (int i = 0; i < cycles; i++) {
		int s = dial(host, port, 0);
		if (s < 0)
			FAIL("cycle %d: connect", i);
		fill((uint64_t)i, 0, out, bytes);
		if (write_all(s, out, bytes) < 0)
			FAIL("cycle %d: write", i);
		ssize_t r = read_full(s, in, bytes);
		if (r != (ssize_t)bytes)
			FAIL("cycle %d: read %zd of %zu", i, r, bytes);
		if (memcmp(in, out, bytes) != 0)
			FAIL("cycle %d: echo differs", i);
		CHECK(close(s) == 0);
		if ((i + 1) % step == 0)
			say("AT %d fds=%d rss=%ld", i + 1, fd_count(), rss_kib());
	}
	say("SOAK ok %d", cycles);
	return 0;
}

/* on_term waits for SIGTERM and exits normally, so that libsdp writes its
 * statistics at exit. */
static void *on_term(void *arg)
{
	sigset_t *set = arg;
	int sig;
	sigwait(set, &sig);
	exit(0);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	static sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	pthread_t tt;
	CHECK(pthread_create(&tt, NULL, on_term, &term) == 0);
	signal(SIGPIPE, SIG_IGN);
	alarm(600);
	raise_nofile();
	const char *m = argc > 1 ? argv[1] : "";
	if (!strcmp(m, "sink"))
		return sink(argc > 2 ? atoi(argv[2]) : 0, argc > 3 ? argv[3] : NULL);
	if (!strcmp(m, "echo"))
		return echo(argc > 2 ? atoi(argv[2]) : 0, argc > 3 ? argv[3] : NULL);
	if ((!strcmp(m, "send") || !strcmp(m, "retry")) && argc >= 7) {
		int retry = !strcmp(m, "retry") ? 30000 : 0;
		int conns = atoi(argv[5]), kibps = argc > 7 ? atoi(argv[7]) : 0;
		uint64_t bytes = strtoull(argv[4], NULL, 0), seed = strtoull(argv[6], NULL, 0);
		for (int i = 0; i < conns; i++)
			send_one(argv[2], atoi(argv[3]), bytes, seed + (uint64_t)i, kibps, retry, i);
		return 0;
	}
	if (!strcmp(m, "echocli") && argc == 5)
		return echocli(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(m, "hold") && argc == 5)
		return hold(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(m, "soak") && argc == 6)
		return soak(argv[2], atoi(argv[3]), atoi(argv[4]), (size_t)strtoul(argv[5], NULL, 0));
	fprintf(stderr, "usage: see the comment at the top of relprog.c\n");
	return 2;
}
