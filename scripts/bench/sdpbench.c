/* sdpbench: the socket micro-benchmarks of the papers libsdp's design comes
 * from, in plain POSIX C so that the same binary runs over the kernel's TCP
 * and, unmodified, under LD_PRELOAD=build/libsdp.so. The papers, as cited
 * below:
 *   [hybrid]  Balaji, Bhagvat, Thakur, Panda: "Sockets Direct Protocol for
 *             Hybrid Network Stacks: A Case Study with iWARP over 10G
 *             Ethernet"
 *   [flow]    Balaji, Bhagvat, Panda, Thakur, Gropp: "Advanced Flow-control
 *             Mechanisms for the Sockets Direct Protocol over InfiniBand"
 *             (ICPP 2007)
 *   [event]   Majumder, Rixner, Pai: "An Event-driven Architecture for MPI
 *             Libraries"
 *   [ooo]     Balaji, Feng, Bhagvat, Panda, Thakur, Gropp: "Analyzing the
 *             Impact of Supporting Out-of-Order Communication on In-order
 *             Performance with iWARP"
 *
 *   sdpbench server ADDR PORT
 *       accepts one connection and serves the cases the client asks for;
 *       prints "ready" once it listens.
 *   sdpbench client ADDR PORT TEST SIZES [key=value...]
 *       TEST   lat | bw | progress | wait | util
 *       SIZES  comma-separated message sizes in bytes
 *       runs=R         runs per case (default 10); the highest and the lowest
 *                      are dropped and the others averaged ([hybrid] §5.1,
 *                      [flow] §5, [ooo] §IV-A)
 *       iters=N        iterations per run (default 10000, scaled down for large
 *                      messages by bytes=B: at most B bytes per run, at least
 *                      miniters=M iterations)
 *       compute=C,...  microseconds of computation (a busy loop), one case each
 *       burst=K        messages per burst (progress, default 100)
 *       nodelay=1      TCP_NODELAY on both ends
 *       capacity=B     receive buffer space the utilization is relative to
 *       budget=S       seconds the measured runs of one case may take: fewer
 *                      iterations (never below miniters) when they would not fit
 *       full=B         no budget for messages of up to B bytes
 *
 * Each case prints one line of key=value pairs on stdout:
 *   lat       ping-pong latency: half the round trip (us)
 *   bw        unidirectional bandwidth (MB/s, 1 MB = 10^6 bytes) and messages/s:
 *             the receiver acknowledges all N messages with one byte and the
 *             sender subtracts the one-way latency of that byte; with compute,
 *             C us of computation precede each send ([ooo] Fig. 14)
 *   progress  bursts of K messages each way with C us of computation after
 *             each burst on both sides ([flow] Fig. 5): time per iteration (us)
 *   wait      the receiver computes C us, then waits in recv for the message;
 *             the time spent in recv is the wait time ([event] Fig. 10-11)
 *   util      the sender streams; a slower receiver (C us per message) samples
 *             FIONREAD before each read: bytes waiting in the receive buffers,
 *             as a share of capacity ([flow] Fig. 6)
 * with the CPU time of both processes (getrusage) over the case.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { T_END, T_LAT, T_BW, T_PROGRESS, T_WAIT, T_UTIL };
enum { MAXRUNS = 1000, MAXLIST = 64 };

static const char *test_names[] = { "end", "lat", "bw", "progress", "wait", "util" };

/* The client's request for one case, sent before it starts. */
struct req {
	uint32_t test, runs, iters, warm, compute_us, burst, nodelay;
	uint64_t size;
};

/* What the server measured, sent back after the case. */
struct rep {
	double user_s, sys_s;
	double val[MAXRUNS];
};

static void die(const char *what)
{
	fprintf(stderr, "sdpbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void fail(const char *what)
{
	fprintf(stderr, "sdpbench: %s\n", what);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* compute busy-waits for us microseconds: the application's computation. */
static volatile uint64_t sink;
static void compute(uint32_t us)
{
	if (!us)
		return;
	double end = now_s() + us / 1e6;
	uint64_t x = sink;
	while (now_s() < end)
		for (int i = 0; i < 64; i++)
			x = x * 6364136223846793005ULL + 1;
	sink = x;
}

static void cpu(double *user, double *sys)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	*user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	*sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void put_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("send");
		p += w;
		n -= (size_t)w;
	}
}

static void get_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t r = recv(fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("recv");
		if (r == 0)
			fail("peer closed the connection");
		p += r;
		n -= (size_t)r;
	}
}

/* get_total receives total bytes with reads of at most chunk bytes. */
static void get_total(int fd, char *buf, size_t chunk, uint64_t total)
{
	while (total) {
		size_t want = total < chunk ? (size_t)total : chunk;
		ssize_t r = recv(fd, buf, want, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("recv");
		if (r == 0)
			fail("peer closed the connection");
		total -= (uint64_t)r;
	}
}

/* set_nodelay turns TCP_NODELAY on when asked, and otherwise leaves the
 * socket as it is: turning it off would be a request of its own (and under
 * libsdp it reaches the transport socket). */
static void set_nodelay(int fd, int on)
{
	if (on && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on))
		die("setsockopt TCP_NODELAY");
}

static struct sockaddr_in addr_of(const char *host, const char *port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		fail("address is not dotted IPv4");
	return a;
}

static char *alloc_buf(uint64_t size)
{
	char *b = malloc(size ? size : 1);
	if (!b)
		fail("out of memory");
	memset(b, 'a', size ? size : 1);
	return b;
}

/* ---- server ---- */

static void serve_case(int fd, const struct req *q)
{
	static struct rep rp;
	double u0, s0;
	memset(&rp, 0, sizeof rp);
	cpu(&u0, &s0);
	char *buf = alloc_buf(q->size);
	char ack[4] = { 0 };
	set_nodelay(fd, q->nodelay);
	for (uint32_t r = q->warm ? 0 : 1; r <= q->runs; r++) { /* run 0 warms up */
		uint32_t iters = r ? q->iters : q->warm;
		double acc = 0;
		switch (q->test) {
		case T_LAT:
			for (uint32_t i = 0; i < iters; i++) {
				get_all(fd, buf, q->size);
				put_all(fd, buf, q->size);
			}
			break;
		case T_BW:
			get_total(fd, buf, q->size, q->size * iters);
			put_all(fd, ack, 1);
			break;
		case T_PROGRESS:
			for (uint32_t i = 0; i < iters; i++) {
				for (uint32_t b = 0; b < q->burst; b++)
					get_all(fd, buf, q->size);
				compute(q->compute_us);
				for (uint32_t b = 0; b < q->burst; b++)
					put_all(fd, buf, q->size);
			}
			break;
		case T_WAIT:
			for (uint32_t i = 0; i < iters; i++) {
				compute(q->compute_us);
				double t = now_s();
				get_all(fd, buf, q->size);
				acc += now_s() - t;
				put_all(fd, ack, 4);
			}
			break;
		case T_UTIL:
			for (uint32_t i = 0; i < iters; i++) {
				int queued = 0;
				if (ioctl(fd, FIONREAD, &queued))
					die("ioctl FIONREAD");
				acc += queued;
				get_all(fd, buf, q->size);
				compute(q->compute_us);
			}
			put_all(fd, ack, 1);
			break;
		default:
			fail("unknown test");
		}
		if (r)
			rp.val[r - 1] = acc / iters;
	}
	free(buf);
	double u1, s1;
	cpu(&u1, &s1);
	rp.user_s = u1 - u0;
	rp.sys_s = s1 - s0;
	put_all(fd, &rp, sizeof rp);
}

static int server(const char *host, const char *port)
{
	struct sockaddr_in a = addr_of(host, port);
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		die("socket");
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(ls, (struct sockaddr *)&a, sizeof a))
		die("bind");
	if (listen(ls, 4))
		die("listen");
	printf("ready\n");
	fflush(stdout);
	int fd = accept(ls, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(ls);
	for (;;) {
		struct req q;
		get_all(fd, &q, sizeof q);
		if (q.test == T_END)
			break;
		if (q.runs < 1 || q.runs > MAXRUNS || q.iters < 1 || q.burst < 1)
			fail("bad request");
		serve_case(fd, &q);
	}
	close(fd);
	return 0;
}

/* ---- client ---- */

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* summarize sorts v and sets the papers' statistic (drop the highest and the
 * lowest, average the rest; all of them below 3 runs) and the median. */
static void summarize(double *v, int n, double *trimmed, double *median, double *lo, double *hi)
{
	qsort(v, n, sizeof *v, cmpd);
	int a = n >= 3 ? 1 : 0, b = n >= 3 ? n - 1 : n;
	double s = 0;
	for (int i = a; i < b; i++)
		s += v[i];
	*trimmed = s / (b - a);
	*median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	*lo = v[0];
	*hi = v[n - 1];
}

static int parse_list(const char *s, uint64_t *out)
{
	int n = 0;
	char *copy = strdup(s), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t && n < MAXLIST; t = strtok_r(NULL, ",", &save))
		out[n++] = strtoull(t, NULL, 10);
	free(copy);
	return n;
}

/* one_way measures the one-way latency of a 1-byte message (half a round trip). */
static double one_way(int fd, int nodelay)
{
	struct req q = { .test = T_LAT, .runs = 1, .iters = 200, .warm = 100, .burst = 1, .nodelay = nodelay, .size = 1 };
	static struct rep rp;
	char c = 0;
	put_all(fd, &q, sizeof q);
	double t = 0;
	for (uint32_t r = 0; r <= q.runs; r++) {
		uint32_t iters = r ? q.iters : q.warm;
		t = now_s();
		for (uint32_t i = 0; i < iters; i++) {
			put_all(fd, &c, 1);
			get_all(fd, &c, 1);
		}
		t = (now_s() - t) / iters;
	}
	get_all(fd, &rp, sizeof rp);
	return t / 2;
}

struct opts {
	uint32_t runs, iters, miniters, burst, nodelay;
	uint64_t bytes, capacity;
	double budget; /* seconds the measured runs of one case may take */
	uint64_t full; /* messages up to this size get all their iterations */
};

/* one_run performs run r (0: the warm-up) of case q as the client and returns
 * its raw measurement: microseconds, MB/s or seconds as the test has it. */
static double one_run(int fd, const struct req *q, uint32_t r, char *buf, double ow)
{
	uint32_t iters = r ? q->iters : q->warm;
	uint64_t size = q->size;
	char ack[4];
	double t = now_s();
	switch (q->test) {
	case T_LAT:
		for (uint32_t i = 0; i < iters; i++) {
			put_all(fd, buf, size);
			get_all(fd, buf, size);
		}
		return (now_s() - t) / iters / 2 * 1e6; /* us, one way */
	case T_BW:
		for (uint32_t i = 0; i < iters; i++) {
			compute(q->compute_us);
			put_all(fd, buf, size);
		}
		get_all(fd, ack, 1);
		t = now_s() - t - ow;
		return (double)size * iters / t / 1e6; /* MB/s */
	case T_PROGRESS:
		for (uint32_t i = 0; i < iters; i++) {
			for (uint32_t b = 0; b < q->burst; b++)
				put_all(fd, buf, size);
			compute(q->compute_us);
			for (uint32_t b = 0; b < q->burst; b++)
				get_all(fd, buf, size);
		}
		return (now_s() - t) / iters * 1e6; /* us per iteration */
	case T_WAIT:
		for (uint32_t i = 0; i < iters; i++) {
			put_all(fd, buf, size);
			get_all(fd, ack, 4);
		}
		return (now_s() - t) / iters * 1e6; /* us per iteration */
	case T_UTIL:
		for (uint32_t i = 0; i < iters; i++)
			put_all(fd, buf, size);
		get_all(fd, ack, 1);
		return now_s() - t;
	}
	return 0;
}

/* probe runs the case with more and more iterations, until one probe takes
 * 50 ms or has all of them, and returns seconds per iteration, from which the
 * iteration count that fits the time budget follows. The last two probes are
 * compared, so that a fixed delay per run (the final acknowledgement held by
 * Nagle's algorithm, a flush timer) does not count as time per iteration. */
static double probe(int fd, struct req q, char *buf, double ow)
{
	static struct rep rp;
	uint32_t all = q.iters, prev_n = 0;
	double prev_t = 0;
	q.runs = 1;
	q.warm = 0;
	q.iters = all < 10 ? all : 10;
	for (;;) {
		put_all(fd, &q, sizeof q);
		double t = now_s();
		one_run(fd, &q, 1, buf, ow);
		t = now_s() - t;
		get_all(fd, &rp, sizeof rp);
		if ((t >= 0.05 && prev_n) || q.iters == all) {
			if (prev_n && q.iters > prev_n && t > prev_t)
				return (t - prev_t) / (q.iters - prev_n);
			return t / q.iters;
		}
		prev_n = q.iters;
		prev_t = t;
		q.iters = all / 8 < q.iters ? all : q.iters * 8;
	}
}

static void run_case(int fd, int test, uint64_t size, uint32_t compute_us, const struct opts *o, double ow)
{
	struct req q = { .test = (uint32_t)test, .runs = o->runs, .burst = o->burst, .nodelay = o->nodelay, .size = size };
	q.compute_us = compute_us;
	uint64_t per = (test == T_PROGRESS ? (uint64_t)o->burst : 1) * (size ? size : 1);
	uint64_t it = o->iters;
	if (o->bytes && it * per > o->bytes)
		it = o->bytes / per;
	if (it < o->miniters)
		it = o->miniters;
	if (it < 1)
		it = 1;
	q.iters = (uint32_t)it;
	set_nodelay(fd, o->nodelay);
	char *buf = alloc_buf(size);
	uint32_t asked = q.iters;
	if (o->budget > 0 && size > o->full) {
		double secs = probe(fd, q, buf, ow);
		double fit = o->budget / q.runs / (secs > 1e-9 ? secs : 1e-9);
		if (fit < q.iters)
			q.iters = fit > o->miniters ? (uint32_t)fit : o->miniters;
	}
	q.warm = q.iters / 10 < 1 ? 1 : q.iters / 10 > 100 ? 100 : q.iters / 10;
	put_all(fd, &q, sizeof q);
	double v[MAXRUNS];
	double u0, s0, w0 = now_s();
	cpu(&u0, &s0);
	for (uint32_t r = 0; r <= q.runs; r++) {
		double x = one_run(fd, &q, r, buf, ow);
		if (r)
			v[r - 1] = x;
	}
	static struct rep rp;
	get_all(fd, &rp, sizeof rp);
	double u1, s1;
	cpu(&u1, &s1);
	double wall = now_s() - w0;
	free(buf);

	double tr, med, lo, hi;
	const char *unit = "us";
	double extra = 0;
	if (test == T_WAIT || test == T_UTIL) {
		/* the value is what the receiver measured */
		double iter_tr, iter_med, a, b;
		summarize(v, q.runs, &iter_tr, &iter_med, &a, &b);
		extra = iter_tr;
		memcpy(v, rp.val, sizeof(double) * q.runs);
		if (test == T_UTIL) {
			unit = "pct";
			for (uint32_t r = 0; r < q.runs; r++)
				v[r] = o->capacity ? 100.0 * v[r] / o->capacity : v[r];
		} else {
			for (uint32_t r = 0; r < q.runs; r++)
				v[r] *= 1e6;
		}
	} else if (test == T_BW) {
		unit = "MB/s";
	}
	summarize(v, q.runs, &tr, &med, &lo, &hi);
	/* every byte the CPU time paid for, the warm-up run included */
	uint64_t moved = (uint64_t)size * ((uint64_t)q.iters * q.runs + q.warm);
	if (test == T_LAT)
		moved *= 2;
	if (test == T_PROGRESS)
		moved *= 2 * q.burst;
	printf("test=%s size=%llu compute_us=%u runs=%u iters=%u iters_asked=%u value=%.4f unit=%s median=%.4f min=%.4f max=%.4f",
	       test_names[test], (unsigned long long)size, compute_us, q.runs, q.iters, asked, tr, unit, med, lo, hi);
	if (test == T_BW)
		printf(" msgs_per_s=%.1f", tr * 1e6 / (size ? size : 1));
	if (test == T_WAIT)
		printf(" iter_us=%.4f", extra);
	if (test == T_UTIL)
		printf(" capacity=%llu", (unsigned long long)o->capacity);
	printf(" bytes=%llu wall_s=%.4f client_cpu_s=%.4f server_cpu_s=%.4f one_way_us=%.2f\n", (unsigned long long)moved,
	       wall, (u1 - u0) + (s1 - s0), rp.user_s + rp.sys_s, ow * 1e6);
	fflush(stdout);
}

static int client(int argc, char **argv)
{
	const char *host = argv[2], *port = argv[3], *tname = argv[4];
	int test = 0;
	for (int i = 1; i < (int)(sizeof test_names / sizeof *test_names); i++)
		if (!strcmp(tname, test_names[i]))
			test = i;
	if (!test)
		fail("unknown test (lat, bw, progress, wait, util)");
	uint64_t sizes[MAXLIST], comp[MAXLIST] = { 0 };
	int nsizes = parse_list(argv[5], sizes), ncomp = 1;
	struct opts o = { .runs = 10, .iters = 10000, .miniters = 10, .burst = 100 };
	for (int i = 6; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (!eq)
			fail("options are key=value");
		*eq++ = 0;
		if (!strcmp(argv[i], "runs"))
			o.runs = (uint32_t)atoi(eq);
		else if (!strcmp(argv[i], "iters"))
			o.iters = (uint32_t)atoi(eq);
		else if (!strcmp(argv[i], "miniters"))
			o.miniters = (uint32_t)atoi(eq);
		else if (!strcmp(argv[i], "bytes"))
			o.bytes = strtoull(eq, NULL, 10);
		else if (!strcmp(argv[i], "burst"))
			o.burst = (uint32_t)atoi(eq);
		else if (!strcmp(argv[i], "nodelay"))
			o.nodelay = (uint32_t)atoi(eq);
		else if (!strcmp(argv[i], "full"))
			o.full = strtoull(eq, NULL, 10);
		else if (!strcmp(argv[i], "budget"))
			o.budget = atof(eq);
		else if (!strcmp(argv[i], "capacity"))
			o.capacity = strtoull(eq, NULL, 10);
		else if (!strcmp(argv[i], "compute"))
			ncomp = parse_list(eq, comp);
		else
			fail("unknown option");
	}
	if (o.runs < 1 || o.runs > MAXRUNS || nsizes < 1 || ncomp < 1 || o.burst < 1)
		fail("bad runs, sizes, compute or burst");

	struct sockaddr_in a = addr_of(host, port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof a))
		die("connect");
	double ow = test == T_BW ? one_way(fd, o.nodelay) : 0;
	for (int s = 0; s < nsizes; s++)
		for (int c = 0; c < ncomp; c++)
			run_case(fd, test, sizes[s], (uint32_t)comp[c], &o, ow);
	struct req end = { .test = T_END };
	put_all(fd, &end, sizeof end);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	/* a benchmark that hangs must not hang make bench */
	const char *lim = getenv("SDPBENCH_TIMEOUT");
	alarm(lim ? (unsigned)atoi(lim) : 600);
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(argv[2], argv[3]);
	if (argc >= 6 && !strcmp(argv[1], "client"))
		return client(argc, argv);
	fprintf(stderr, "usage: sdpbench server ADDR PORT | sdpbench client ADDR PORT TEST SIZES [key=value...]\n");
	return 2;
}
