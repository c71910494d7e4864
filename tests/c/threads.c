/* threads.c: many threads sharing sockets and one epoll set, the worker
 * pattern of nginx and memcached.
 *
 * The client makes NCONN connections and runs NTHR threads; the server runs
 * NTHR threads too. On each side every socket is non-blocking and sits in
 * one epoll set with EPOLLIN | EPOLLET | EPOLLONESHOT; the thread that gets
 * a socket's event reads until EAGAIN, handles the complete messages and
 * re-arms the socket with EPOLL_CTL_MOD. Sends go to the shared sockets from
 * any thread, a per-socket mutex keeping each message whole.
 *
 * Client thread k sends MSGS requests, request i on connection (k + i) %
 * NCONN, with at most WINDOW unanswered; each carries its thread, sequence
 * number, a length and payload derived from both, and a checksum. The
 * server checks every request (payload, checksum, and that requests of one
 * thread on one connection arrive in order with none missing) and answers
 * each with a reply carrying the request's checksum, which the client
 * matches against what it sent. At the end both sides check the totals.
 * Two threads getting the same one-shot event, or an event for a socket not
 * re-armed, fails the test. The state of a role is global, so the program
 * runs as separate server and client processes (no "self" mode). */
#include "capi.h"
#include <stdatomic.h>
#include <sys/epoll.h>

#define NCONN 4
#define NTHR 16
#define MSGS 1500
#define WINDOW 4
#define MAXPAY 1500
#define HDR 20
#define INBUF 65536
#define MAGIC_REQ 0x52455131u /* "REQ1" */
#define MAGIC_REP 0x52455031u /* "REP1" */
#define STALL_MS 10000        /* no progress for this long fails the test */

struct conn {
	int fd;
	int idx;
	pthread_mutex_t wmu;
	atomic_int busy; /* a thread owns the socket's one-shot event */
	atomic_int done; /* end of stream seen: never re-armed */
	uint8_t in[INBUF];
	size_t inlen;
	/* server: the next sequence number expected from each client thread */
	uint32_t next_seq[NTHR];
	uint32_t count[NTHR];
};

static struct conn conns[NCONN];
static int epfd;
static atomic_int conns_done;
static atomic_long total_msgs;
static atomic_llong last_progress;

/* client: requests sent and not answered yet, per thread */
struct pending {
	int used;
	uint32_t seq, csum;
	int conn;
};
static struct pending pend[NTHR][WINDOW];
static pthread_mutex_t pend_mu[NTHR];
static atomic_int outstanding[NTHR];

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static uint32_t fnv(const uint8_t *b, size_t n, uint32_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

static uint32_t msg_len(uint32_t thr, uint32_t seq) { return (seq * 7919u + thr * 131u) % (MAXPAY + 1); }
static uint32_t msg_seed(uint32_t thr, uint32_t seq) { return thr << 20 ^ seq; }

static void progress(void) { atomic_store(&last_progress, (long long)now_ms()); }

/* send_msg writes one whole message on a shared non-blocking socket. */
static void send_msg(struct conn *cn, const uint8_t *b, size_t n)
{
	size_t off = 0;
	while (off < n) {
		ssize_t w = write(cn->fd, b + off, n - off);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			short ev = wait_fd(cn->fd, POLLOUT, STALL_MS);
			CHECK(ev & POLLOUT, "connection %d writable within %d ms (revents 0x%x)", cn->idx, STALL_MS, ev);
			continue;
		}
		FAIL("write on connection %d returned %zd after %zu of %zu bytes", cn->idx, w, off, n);
	}
}

static void arm(struct conn *cn, int op)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET | EPOLLONESHOT, .data.u32 = (uint32_t)cn->idx };
	SYS(epoll_ctl(epfd, op, cn->fd, &ev));
}

/* server_msg checks one request and answers it. */
static void server_msg(struct conn *cn, const uint8_t *m)
{
	uint32_t thr = get32(m + 4) & 0xffff, conn = get32(m + 4) >> 16, seq = get32(m + 8), len = get32(m + 12);
	CHECK(get32(m) == MAGIC_REQ, "request magic on connection %d: 0x%08x", cn->idx, get32(m));
	CHECK(thr < NTHR && (int)conn == cn->idx, "request of thread %u for connection %u arrived on %d", thr,
	      conn, cn->idx);
	CHECK(seq == cn->next_seq[thr], "thread %u on connection %d: request %u, want %u (lost or reordered)", thr,
	      cn->idx, seq, cn->next_seq[thr]);
	CHECK(len == msg_len(thr, seq), "thread %u request %u: length %u, want %u", thr, seq, len,
	      msg_len(thr, seq));
	uint32_t cs = fnv(m + HDR, len, 2166136261u ^ seq);
	CHECK(cs == get32(m + 16), "thread %u request %u: checksum 0x%08x, header says 0x%08x", thr, seq, cs,
	      get32(m + 16));
	VERIFY(m + HDR, len, msg_seed(thr, seq), 0);
	cn->next_seq[thr] = seq + NCONN;
	cn->count[thr]++;
	uint8_t r[HDR];
	put32(r, MAGIC_REP);
	put32(r + 4, get32(m + 4));
	put32(r + 8, seq);
	put32(r + 12, 0);
	put32(r + 16, cs);
	pthread_mutex_lock(&cn->wmu);
	send_msg(cn, r, HDR);
	pthread_mutex_unlock(&cn->wmu);
	atomic_fetch_add(&total_msgs, 1);
}

/* client_msg matches one reply with the request it answers. */
static void client_msg(struct conn *cn, const uint8_t *m)
{
	uint32_t thr = get32(m + 4) & 0xffff, conn = get32(m + 4) >> 16, seq = get32(m + 8);
	CHECK(get32(m) == MAGIC_REP, "reply magic on connection %d: 0x%08x", cn->idx, get32(m));
	CHECK(thr < NTHR && (int)conn == cn->idx, "reply for thread %u, connection %u arrived on %d", thr, conn,
	      cn->idx);
	pthread_mutex_lock(&pend_mu[thr]);
	struct pending *p = NULL;
	for (int i = 0; i < WINDOW; i++)
		if (pend[thr][i].used && pend[thr][i].seq == seq)
			p = &pend[thr][i];
	CHECK(p != NULL, "reply to thread %u request %u on connection %d matches a request in flight", thr, seq,
	      cn->idx);
	CHECK(p->conn == cn->idx, "reply to thread %u request %u arrived on connection %d, sent on %d", thr, seq,
	      cn->idx, p->conn);
	CHECK(get32(m + 16) == p->csum, "reply to thread %u request %u: checksum 0x%08x, sent 0x%08x", thr, seq,
	      get32(m + 16), p->csum);
	p->used = 0;
	pthread_mutex_unlock(&pend_mu[thr]);
	atomic_fetch_sub(&outstanding[thr], 1);
	atomic_fetch_add(&total_msgs, 1);
}

/* drain reads a socket whose event this thread owns until EAGAIN and
 * handles every complete message. Returns 1 at the end of the stream. */
static int drain(struct conn *cn, int is_server)
{
	for (;;) {
		ssize_t r = read(cn->fd, cn->in + cn->inlen, INBUF - cn->inlen);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r < 0)
			FAIL("read on connection %d", cn->idx);
		if (r == 0) {
			CHECK(cn->inlen == 0, "end of stream on connection %d inside a message (%zu bytes pending)",
			      cn->idx, cn->inlen);
			return 1;
		}
		cn->inlen += (size_t)r;
		progress();
		size_t off = 0;
		while (cn->inlen - off >= HDR) {
			const uint8_t *m = cn->in + off;
			uint32_t len = get32(m + 12);
			CHECK(len <= MAXPAY, "message length %u on connection %d (magic 0x%08x)", len, cn->idx, get32(m));
			if (cn->inlen - off < HDR + len)
				break;
			if (is_server)
				server_msg(cn, m);
			else
				client_msg(cn, m);
			off += HDR + len;
		}
		memmove(cn->in, cn->in + off, cn->inlen - off);
		cn->inlen -= off;
	}
}

/* work waits up to ms for one socket event and handles it. */
static void work(int is_server, int ms)
{
	struct epoll_event ev;
	int n = epoll_wait(epfd, &ev, 1, ms);
	if (n < 0 && errno == EINTR)
		return;
	CHECK(n >= 0, "epoll_wait returned %d", n);
	if (n == 0) {
		CHECK(now_ms() - atomic_load(&last_progress) < STALL_MS,
		      "progress within %d ms (%ld messages handled)", STALL_MS, atomic_load(&total_msgs));
		return;
	}
	CHECK(ev.data.u32 < NCONN, "event data %u", ev.data.u32);
	struct conn *cn = &conns[ev.data.u32];
	CHECK(!atomic_load(&cn->done), "no event for connection %d after its end of stream (not re-armed)", cn->idx);
	CHECK(atomic_exchange(&cn->busy, 1) == 0,
	      "one thread at a time owns connection %d's one-shot event (events 0x%x)", cn->idx, ev.events);
	int eof = drain(cn, is_server);
	atomic_store(&cn->busy, 0);
	if (eof) {
		atomic_store(&cn->done, 1);
		atomic_fetch_add(&conns_done, 1);
		progress();
		return;
	}
	arm(cn, EPOLL_CTL_MOD);
}

static void init_conns(void)
{
	epfd = SYS(epoll_create1(EPOLL_CLOEXEC));
	for (int i = 0; i < NCONN; i++) {
		pthread_mutex_init(&conns[i].wmu, NULL);
		for (int k = 0; k < NTHR; k++)
			conns[i].next_seq[k] = (uint32_t)((i - k + NTHR * NCONN) % NCONN);
	}
	for (int k = 0; k < NTHR; k++)
		pthread_mutex_init(&pend_mu[k], NULL);
	progress();
}

static void start_conns(void)
{
	for (int i = 0; i < NCONN; i++) {
		set_nonblock(conns[i].fd, 1);
		arm(&conns[i], EPOLL_CTL_ADD);
	}
}

static void run_threads(void *(*fn)(void *))
{
	pthread_t th[NTHR];
	for (long k = 0; k < NTHR; k++)
		if (pthread_create(&th[k], NULL, fn, (void *)k))
			FAIL("pthread_create");
	for (int k = 0; k < NTHR; k++)
		pthread_join(th[k], NULL);
}

static void setup(struct ctx *c)
{
	c->lfd[0] = listen4(&c->port[0]);
	c->nl = 1;
}

static void *server_worker(void *arg)
{
	(void)arg;
	role = "server";
	while (atomic_load(&conns_done) < NCONN)
		work(1, 20);
	return NULL;
}

static void server(struct ctx *c)
{
	watchdog(30);
	init_conns();
	/* Each connection starts with its index, so both sides agree on it. */
	for (int i = 0; i < NCONN; i++) {
		int fd = ACCEPT(c->lfd[0]);
		uint8_t b[4];
		READ_EXACT(fd, b, 4);
		uint32_t idx = get32(b);
		CHECK(idx < NCONN && conns[idx].fd == 0, "connection index %u", idx);
		conns[idx].fd = fd;
		conns[idx].idx = (int)idx;
	}
	start_conns();
	run_threads(server_worker);
	long want = 0;
	for (int k = 0; k < NTHR; k++)
		for (int i = 0; i < NCONN; i++) {
			uint32_t w = 0;
			for (uint32_t s = 0; s < MSGS; s++)
				w += (k + s) % NCONN == (uint32_t)i;
			CHECK(conns[i].count[k] == w, "thread %d on connection %d: %u requests, want %u", k, i,
			      conns[i].count[k], w);
			want += w;
		}
	EQ(atomic_load(&total_msgs), want);
	EQ(want, (long)NTHR * MSGS);
	for (int i = 0; i < NCONN; i++)
		SYS(close(conns[i].fd));
	SYS(close(epfd));
	SYS(close(c->lfd[0]));
	printf("server requests=%ld\n", atomic_load(&total_msgs));
}

static void *client_worker(void *arg)
{
	int k = (int)(long)arg;
	role = "client";
	uint8_t m[HDR + MAXPAY];
	for (uint32_t seq = 0; seq < MSGS; seq++) {
		int ci = (int)((k + seq) % NCONN);
		struct conn *cn = &conns[ci];
		/* Wait for room in the window, and for the socket's sender to be
		 * free: a thread waiting to send does the shared work meanwhile, so
		 * replies are always read. */
		for (;;) {
			if (atomic_load(&outstanding[k]) < WINDOW && pthread_mutex_trylock(&cn->wmu) == 0)
				break;
			work(0, 5);
		}
		uint32_t len = msg_len((uint32_t)k, seq);
		fill(m + HDR, len, msg_seed((uint32_t)k, seq), 0);
		uint32_t cs = fnv(m + HDR, len, 2166136261u ^ seq);
		put32(m, MAGIC_REQ);
		put32(m + 4, (uint32_t)k | (uint32_t)ci << 16);
		put32(m + 8, seq);
		put32(m + 12, len);
		put32(m + 16, cs);
		pthread_mutex_lock(&pend_mu[k]);
		struct pending *p = NULL;
		for (int i = 0; i < WINDOW; i++)
			if (!pend[k][i].used)
				p = &pend[k][i];
		CHECK(p != NULL, "thread %d has a free window slot", k);
		*p = (struct pending){ .used = 1, .seq = seq, .csum = cs, .conn = ci };
		pthread_mutex_unlock(&pend_mu[k]);
		atomic_fetch_add(&outstanding[k], 1);
		send_msg(cn, m, HDR + len);
		pthread_mutex_unlock(&cn->wmu);
	}
	while (atomic_load(&outstanding[k]) > 0)
		work(0, 5);
	return NULL;
}

static void client(struct ctx *c)
{
	watchdog(30);
	init_conns();
	for (int i = 0; i < NCONN; i++) {
		conns[i].fd = connect4(c->port[0]);
		conns[i].idx = i;
		uint8_t b[4];
		put32(b, (uint32_t)i);
		WRITE_ALL(conns[i].fd, b, 4);
	}
	start_conns();
	int64_t t0 = now_ms();
	run_threads(client_worker);
	int64_t ms = now_ms() - t0;
	EQ(atomic_load(&total_msgs), (long)NTHR * MSGS);
	for (int k = 0; k < NTHR; k++)
		EQ(atomic_load(&outstanding[k]), 0);
	/* The end: the server sees every stream end, then closes its side. */
	SYS(close(epfd));
	for (int i = 0; i < NCONN; i++) {
		set_nonblock(conns[i].fd, 0);
		SYS(shutdown(conns[i].fd, SHUT_WR));
	}
	for (int i = 0; i < NCONN; i++) {
		CHECK(wait_fd(conns[i].fd, POLLIN, STALL_MS) & (POLLIN | POLLHUP), "connection %d ends", i);
		EXPECT_EOF(conns[i].fd);
		SYS(close(conns[i].fd));
	}
	printf("client replies=%ld ms=%lld\n", atomic_load(&total_msgs), (long long)ms);
}
