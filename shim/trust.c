/* Who may answer a connection: the checks a preloaded client makes before
 * it connects to an SDP port (SECURITY.md has the model and its limits).
 *
 * Over TCP, whoever the kernel lets listen on P answers a connection to P.
 * The SDP port S(P) is a second port, which anybody may bind. On this host
 * the kernel tells who listens where: an exact sock_diag look-up of a port
 * returns the listening socket that a SYN to it would reach, with its owner
 * (uid) and its backlog, in the caller's network namespace. A client goes to
 * S(P) only when that listener and P's belong to one user and S(P)'s
 * backlog is twin_backlog() of P's: the mark the shim gives the SDP twin it
 * opens beside a listener, so that an unrelated service of the same user on
 * S(P) is recognised without being connected to.
 *
 * Every system call here is made through syscall(2), which the shim does
 * not interpose, so these checks never re-enter the hooks.
 */
#include "trust.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "raw.h"

/* ---- SDP_TRUST_REMOTE: the other hosts the operator vouches for --------- */

#define TRUST_NETS 32

static struct net {
	int v4;
	uint8_t addr[16];
	int bits;
} nets[TRUST_NETS];
static int n_nets, trust_all;

/* addr16 writes dst's address as 16 octets (IPv4 as v4-mapped) and says
 * whether it is IPv4 (AF_INET, or v4-mapped on an AF_INET6 socket). */
static int addr16(const struct sockaddr *sa, uint8_t out[16])
{
	memset(out, 0, 16);
	if (sa->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 1;
	}
	const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	memcpy(out, a, 16);
	return IN6_IS_ADDR_V4MAPPED(a);
}

static int parse_net(char *s, struct net *n)
{
	int bits = -1;
	char *slash = strchr(s, '/');
	if (slash) {
		char *end;
		*slash = 0;
		long b = strtol(slash + 1, &end, 10);
		if (*end || end == slash + 1 || b < 0)
			return -1;
		bits = (int)b;
	}
	memset(n, 0, sizeof *n);
	if (inet_pton(AF_INET, s, n->addr + 12) == 1) {
		n->v4 = 1;
		n->addr[10] = n->addr[11] = 0xff;
		n->bits = bits < 0 ? 32 : bits;
		return n->bits <= 32 ? 0 : -1;
	}
	if (*s == '[' && s[strlen(s) - 1] == ']') {
		s[strlen(s) - 1] = 0;
		s++;
	}
	if (inet_pton(AF_INET6, s, n->addr) != 1)
		return -1;
	n->bits = bits < 0 ? 128 : bits;
	return n->bits <= 128 ? 0 : -1;
}

int trust_init(const char *spec, char *err, size_t errlen)
{
	n_nets = trust_all = 0;
	if (!spec || !*spec)
		return 0;
	char buf[1024];
	if (strlen(spec) >= sizeof buf) {
		snprintf(err, errlen, "SDP_TRUST_REMOTE is longer than %zu characters; trusting no other host",
			 sizeof buf - 1);
		return -1;
	}
	strcpy(buf, spec);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		if (!strcmp(tok, "*")) {
			trust_all = 1;
			continue;
		}
		if (n_nets == TRUST_NETS || parse_net(tok, &nets[n_nets]) < 0) {
			snprintf(err, errlen,
				 "SDP_TRUST_REMOTE: '%s' is not an address[/bits] (at most %d of them) or '*'; "
				 "trusting no other host", tok, TRUST_NETS);
			n_nets = trust_all = 0;
			return -1;
		}
		n_nets++;
	}
	return 0;
}

static int remote_trusted(const uint8_t ip[16], int v4)
{
	if (trust_all)
		return 1;
	for (int i = 0; i < n_nets; i++) {
		const struct net *n = &nets[i];
		if (n->v4 != v4)
			continue;
		int bits = n->bits + (v4 ? 96 : 0), j = 0;
		for (; bits >= 8; j++, bits -= 8)
			if (ip[j] != n->addr[j])
				break;
		if (bits >= 8)
			continue;
		uint8_t mask = (uint8_t)(0xff << (8 - bits));
		if (bits == 0 || (ip[j] & mask) == (n->addr[j] & mask))
			return 1;
	}
	return 0;
}

/* ---- netlink: questions and their answers -------------------------------- */

static int nl_open(int proto)
{
	return (int)syscall(SYS_socket, AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, proto);
}

static _Atomic uint32_t seqs;

/* nl_send sends n requests, laid one after the other in req (len bytes in
 * all), in one system call: the kernel answers each in turn. It numbers
 * them from *first on. Returns 0, or -1 when they could not be sent. */
static int nl_send(int s, char *req, size_t len, int n, uint32_t *first)
{
	*first = atomic_fetch_add(&seqs, (uint32_t)n) + 1;
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		struct nlmsghdr *h = (struct nlmsghdr *)(req + off);
		h->nlmsg_seq = *first + (uint32_t)i;
		off += NLMSG_ALIGN(h->nlmsg_len);
	}
	struct sockaddr_nl k = { .nl_family = AF_NETLINK };
	long w;
	for (int tries = 0; (w = syscall(SYS_sendto, s, req, len, 0, &k, sizeof k)) < 0 && tries < 8; tries++)
		if (errno != EINTR && errno != ENOBUFS && errno != EAGAIN)
			break;
	return w == (long)len ? 0 : -1;
}

/* An answer: its payload type (or NLMSG_ERROR with error set), and the
 * payload when it is one the caller asked about. */
struct nl_answer {
	int type, error;
	char payload[sizeof(struct inet_diag_msg) > sizeof(struct rtmsg) ? sizeof(struct inet_diag_msg)
									 : sizeof(struct rtmsg)];
};

/* nl_collect reads the answers to the n questions numbered from first on.
 * The kernel answers a sock_diag or route question before the sendto that
 * asked it returns, so nothing here waits: an answer that is not there
 * (taken by a process that shares the socket) fails the question instead
 * of hanging the caller. All n are read with one recvmmsg when nothing
 * older is left unread. Returns 0 when every answer came, else -1. */
static int nl_collect(int s, uint32_t first, int n, struct nl_answer *out)
{
	char bufs[2][1024];
	int got = 0;
	for (int i = 0; i < n; i++)
		out[i].type = -1;
	for (int tries = 0; got < n && tries < 8; tries++) {
		struct mmsghdr mm[2];
		struct iovec iov[2];
		int want = n - got > 2 ? 2 : n - got;
		memset(mm, 0, sizeof mm);
		for (int i = 0; i < want; i++) {
			iov[i] = (struct iovec){ bufs[i], sizeof bufs[i] };
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
		}
		int r = (int)syscall(SYS_recvmmsg, s, mm, want, MSG_DONTWAIT, NULL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		for (int i = 0; i < r; i++) {
			long len = mm[i].msg_len;
			struct nlmsghdr *h = (struct nlmsghdr *)bufs[i];
			if (len < (long)sizeof *h || !NLMSG_OK(h, (unsigned long)len))
				return -1;
			uint32_t at = h->nlmsg_seq - first;
			if (at >= (uint32_t)n || out[at].type != -1)
				continue; /* the answer to an earlier question left unread */
			got++;
			out[at].type = h->nlmsg_type;
			if (h->nlmsg_type == NLMSG_ERROR) {
				out[at].error = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
				continue;
			}
			size_t pl = h->nlmsg_len - NLMSG_HDRLEN;
			memcpy(out[at].payload, NLMSG_DATA(h), pl < sizeof out[at].payload ? pl : sizeof out[at].payload);
		}
	}
	return got == n ? 0 : -1;
}

/* The sock_diag socket is opened once per process and kept (on a descriptor
 * the shim protects, trust_keep): a connect() made when the process holds
 * all the descriptors it may must not fail for want of one more. It is
 * known by its inode, which one fstat compares: a descriptor that no longer
 * holds it (closed around libc and reused) is never written to, and a new
 * socket replaces it. A child after fork gets its own on the same
 * descriptor (trust_forked): answers would go to either process. Its users
 * take diag_mu, which fork holds still. */
static int diag_fd = -1;
static ino_t diag_ino;
static pthread_mutex_t diag_mu = PTHREAD_MUTEX_INITIALIZER;
static int (*keeper)(int fd);

static int fstat_fd(int fd, struct stat *st)
{
#ifdef SYS_fstat
	return (int)syscall(SYS_fstat, fd, st);
#else
	return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
#endif
}

static int diag_open(void)
{
	struct stat st;
	int s = nl_open(NETLINK_SOCK_DIAG);
	if (s < 0)
		return -1;
	if (fstat_fd(s, &st) < 0) {
		syscall(SYS_close, s);
		return -1;
	}
	diag_ino = st.st_ino;
	return s;
}

static int diag_get(void)
{
	struct stat st;
	if (diag_fd >= 0 && fstat_fd(diag_fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == diag_ino)
		return diag_fd;
	int s = diag_open();
	if (s >= 0)
		diag_fd = keeper ? keeper(s) : s;
	return s < 0 ? -1 : diag_fd;
}

static void diag_prefork(void)
{
	pthread_mutex_lock(&diag_mu);
}

static void diag_parent(void)
{
	pthread_mutex_unlock(&diag_mu);
}

static void diag_child(void)
{
	if (diag_fd >= 0) {
		/* The same descriptor, which the shim guards, with a socket of
		 * the child's own; the parent's copy is closed by dup3. */
		int s = diag_open();
		if (s < 0 || syscall(SYS_dup3, s, diag_fd, O_CLOEXEC) < 0)
			diag_ino = 0; /* asked again, diag_get opens another */
		if (s >= 0)
			syscall(SYS_close, s);
	}
	pthread_mutex_unlock(&diag_mu);
}

void trust_keep(int (*keep)(int fd))
{
	keeper = keep;
	static int once;
	if (!once++)
		pthread_atfork(diag_prefork, diag_parent, diag_child);
}

/* is_local says whether ip is an address of this host in this network
 * namespace: loopback at once, else the kernel's route to it is RTN_LOCAL.
 * It returns 1, 0, or -1 when the kernel could not be asked. */
static int is_local(const uint8_t ip[16], int v4)
{
	static const uint8_t lo6[16] = { [15] = 1 };
	if (v4 ? ip[12] == 127 : !memcmp(ip, lo6, 16))
		return 1;
	struct {
		struct nlmsghdr h;
		struct rtmsg r;
		struct rtattr a;
		uint8_t dst[16];
	} q;
	memset(&q, 0, sizeof q);
	int alen = v4 ? 4 : 16;
	q.h.nlmsg_len = NLMSG_LENGTH(sizeof q.r) + RTA_LENGTH(alen);
	q.h.nlmsg_type = RTM_GETROUTE;
	q.h.nlmsg_flags = NLM_F_REQUEST;
	q.r.rtm_family = v4 ? AF_INET : AF_INET6;
	q.r.rtm_dst_len = alen * 8;
	q.a.rta_type = RTA_DST;
	q.a.rta_len = RTA_LENGTH(alen);
	memcpy(q.dst, v4 ? ip + 12 : ip, alen);
	int s = nl_open(NETLINK_ROUTE);
	if (s < 0)
		return -1;
	uint32_t first;
	struct nl_answer a;
	int r = nl_send(s, (char *)&q, q.h.nlmsg_len, 1, &first) == 0 ? nl_collect(s, first, 1, &a) : -1;
	syscall(SYS_close, s);
	if (r < 0)
		return -1;
	if (a.type == NLMSG_ERROR)
		return a.error == ENETUNREACH || a.error == EHOSTUNREACH ? 0 : -1;
	if (a.type != RTM_NEWROUTE)
		return -1;
	return ((struct rtmsg *)a.payload)->rtm_type == RTN_LOCAL;
}

struct listener {
	int found;
	unsigned uid, backlog;
};

/* who_listens asks which listeners a SYN to ip:ports[i] would reach in this
 * network namespace, for n (at most 2) ports, in one question to the
 * kernel: exact sock_diag look-ups, sent together and answered together.
 * It returns 0 (l[i].found says whether there is one) or -1 when the kernel
 * could not be asked. */
static int who_listens(int s, const uint8_t ip[16], int v4, const int *ports, int n, struct listener *l)
{
	struct diag_req {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} q[2];
	memset(q, 0, sizeof q);
	for (int i = 0; i < n; i++) {
		q[i].h.nlmsg_len = sizeof q[i];
		q[i].h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
		q[i].h.nlmsg_flags = NLM_F_REQUEST;
		q[i].r.sdiag_family = v4 ? AF_INET : AF_INET6;
		q[i].r.sdiag_protocol = IPPROTO_TCP;
		q[i].r.idiag_states = ~0u;
		q[i].r.id.idiag_sport = htons((uint16_t)ports[i]);
		memcpy(q[i].r.id.idiag_src, v4 ? ip + 12 : ip, v4 ? 4 : 16);
		q[i].r.id.idiag_cookie[0] = q[i].r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	}
	_Static_assert(sizeof(struct diag_req) == NLMSG_ALIGN(sizeof(struct diag_req)), "requests laid end to end");
	uint32_t first;
	struct nl_answer a[2];
	if (nl_send(s, (char *)q, n * sizeof q[0], n, &first) < 0 || nl_collect(s, first, n, a) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		memset(&l[i], 0, sizeof l[i]);
		if (a[i].type == NLMSG_ERROR && a[i].error == ENOENT)
			continue;
		if (a[i].type != SOCK_DIAG_BY_FAMILY) {
			errno = a[i].type == NLMSG_ERROR ? a[i].error : EPROTO;
			return -1;
		}
		struct inet_diag_msg *m = (struct inet_diag_msg *)a[i].payload;
		/* An established socket with this local port (a connection of
		 * ours to it) can be found before the listener: only a listener
		 * counts. */
		if (m->idiag_state != 10)
			continue;
		l[i].found = 1;
		l[i].uid = m->idiag_uid;
		l[i].backlog = m->idiag_wqueue;
	}
	return 0;
}

int twin_backlog(int backlog)
{
	/* The kernel keeps min(backlog, somaxconn): the twin's is one less than
	 * that (1 for 0), which no application chooses by accident beside it. */
	int max = 4096;
	long fd = syscall(SYS_openat, AT_FDCWD, "/proc/sys/net/core/somaxconn", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char b[16] = { 0 };
		if (syscall(SYS_read, fd, b, sizeof b - 1) > 0 && atoi(b) > 0)
			max = atoi(b);
		syscall(SYS_close, fd);
	}
	unsigned eff = (unsigned)backlog > (unsigned)max ? (unsigned)max : (unsigned)backlog;
	return eff ? (int)eff - 1 : 1;
}

static unsigned twin_of(unsigned backlog)
{
	return backlog ? backlog - 1 : 1;
}

int trust_check(const struct sockaddr *dst, int app_port, int sdp_port, char *detail, size_t n, unsigned *uid)
{
	uint8_t ip[16];
	int v4 = addr16(dst, ip);
	int local = is_local(ip, v4);
	if (local == 0) {
		if (remote_trusted(ip, v4))
			return TRUST_VOUCHED;
		snprintf(detail, n, "another host, not in SDP_TRUST_REMOTE");
		return TRUST_REMOTE;
	}
	pthread_mutex_lock(&diag_mu);
	int s = local < 0 ? -1 : diag_get();
	struct listener l[2];
	int ok = s >= 0 && who_listens(s, ip, v4, (const int[]){ sdp_port, app_port }, 2, l) == 0;
	int err = errno;
	struct listener sl = l[0], pl = l[1];
	pthread_mutex_unlock(&diag_mu);
	if (!ok) {
		snprintf(detail, n, "the kernel could not be asked who listens (%s)", strerror(err));
		return TRUST_UNKNOWN;
	}
	if (!sl.found || !pl.found) {
		snprintf(detail, n, "nothing listens on port %d", sl.found ? app_port : sdp_port);
		return TRUST_NO_LISTENER;
	}
	if (sl.uid != pl.uid) {
		snprintf(detail, n, "SDP port %d belongs to uid %u, port %d to uid %u", sdp_port, sl.uid,
			 app_port, pl.uid);
		return TRUST_OTHER_OWNER;
	}
	if (sl.backlog != twin_of(pl.backlog)) {
		snprintf(detail, n, "port %d is not the SDP listener of port %d (backlog %u, not %u)",
			 sdp_port, app_port, sl.backlog, twin_of(pl.backlog));
		return TRUST_NOT_TWIN;
	}
	*uid = pl.uid;
	return TRUST_SDP;
}

int trust_peer(const struct sockaddr *dst, int sdp_port, unsigned uid)
{
	/* The listener that took the connection, not the accepted socket: an
	 * accepted socket takes the uid of the process that accepts it (a
	 * worker that dropped privileges), while the listener keeps its
	 * creator's, which is what trust_check compared with P's. */
	uint8_t ip[16];
	int v4 = addr16(dst, ip);
	pthread_mutex_lock(&diag_mu);
	int s = diag_get();
	struct listener l;
	int r = s < 0 ? -1 : who_listens(s, ip, v4, &sdp_port, 1, &l);
	pthread_mutex_unlock(&diag_mu);
	if (r < 0 || !l.found)
		return -1;
	return l.uid == uid;
}

int listener_backlog(const struct sockaddr *local)
{
	uint8_t ip[16];
	int v4 = addr16(local, ip);
	static const uint8_t any[16];
	if (!memcmp(ip + (v4 ? 12 : 0), any, v4 ? 4 : 16)) {
		/* bound to every address: ask for it on loopback */
		memset(ip, 0, 16);
		if (v4) {
			ip[10] = ip[11] = 0xff;
			ip[12] = 127, ip[15] = 1;
		} else {
			ip[15] = 1;
		}
	}
	int port = ntohs(local->sa_family == AF_INET ? ((const struct sockaddr_in *)local)->sin_port
						      : ((const struct sockaddr_in6 *)local)->sin6_port);
	pthread_mutex_lock(&diag_mu);
	int s = diag_get();
	struct listener l;
	int r = s < 0 ? -1 : who_listens(s, ip, v4, &port, 1, &l);
	pthread_mutex_unlock(&diag_mu);
	return r < 0 || !l.found ? -1 : (int)l.backlog;
}
