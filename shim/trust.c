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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* ---- netlink: one request, one answer ----------------------------------- */

static int nl_open(int proto)
{
	return (int)syscall(SYS_socket, AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, proto);
}

/* nl_ask sends one request and reads its answer into buf. It returns the
 * answer's payload type (or NLMSG_ERROR with *error set), or -1. */
static int nl_ask(int s, void *req, size_t len, char *buf, size_t cap, int *error)
{
	static _Atomic uint32_t seqs;
	struct nlmsghdr *qh = req;
	qh->nlmsg_seq = ++seqs;
	struct sockaddr_nl k = { .nl_family = AF_NETLINK };
	long w;
	for (int tries = 0; (w = syscall(SYS_sendto, s, req, len, 0, &k, sizeof k)) < 0 && tries < 8; tries++)
		if (errno != EINTR && errno != ENOBUFS && errno != EAGAIN)
			break;
	if (w != (long)len)
		return -1;
	for (int tries = 0; tries < 8; tries++) {
		long n = syscall(SYS_recvfrom, s, buf, cap, 0, NULL, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < (long)sizeof(struct nlmsghdr))
			return -1;
		struct nlmsghdr *h = (struct nlmsghdr *)buf;
		if (!NLMSG_OK(h, (unsigned long)n))
			return -1;
		if (h->nlmsg_seq != qh->nlmsg_seq)
			continue; /* the answer to an earlier question left unread */
		if (h->nlmsg_type == NLMSG_ERROR) {
			*error = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
			return NLMSG_ERROR;
		}
		return h->nlmsg_type;
	}
	return -1;
}

/* The sock_diag socket is opened once per process and kept (on a descriptor
 * the shim protects, trust_keep): a connect() made when the process holds
 * all the descriptors it may must not fail for want of one more. A child
 * after fork opens its own (answers would go to either process); one that
 * is no longer a sock_diag socket (closed around libc and reused) is
 * replaced. Its users take diag_mu. */
static int diag_fd = -1;
static pid_t diag_pid;
static pthread_mutex_t diag_mu = PTHREAD_MUTEX_INITIALIZER;
static int (*keeper)(int fd);

void trust_keep(int (*keep)(int fd))
{
	keeper = keep;
}

static int diag_get(void)
{
	pid_t me = (pid_t)syscall(SYS_getpid);
	if (diag_fd >= 0 && diag_pid == me) {
		int dom = 0, proto = 0;
		socklen_t dl = sizeof dom, pl = sizeof proto;
		if (syscall(SYS_getsockopt, diag_fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) == 0 && dom == AF_NETLINK &&
		    syscall(SYS_getsockopt, diag_fd, SOL_SOCKET, SO_PROTOCOL, &proto, &pl) == 0 &&
		    proto == NETLINK_SOCK_DIAG)
			return diag_fd;
	}
	int s = nl_open(NETLINK_SOCK_DIAG);
	if (s < 0)
		return -1;
	diag_fd = keeper ? keeper(s) : s;
	diag_pid = me;
	return diag_fd;
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
	char buf[1024];
	int error = 0;
	int t = nl_ask(s, &q, q.h.nlmsg_len, buf, sizeof buf, &error);
	syscall(SYS_close, s);
	if (t == NLMSG_ERROR)
		return error == ENETUNREACH || error == EHOSTUNREACH ? 0 : -1;
	if (t != RTM_NEWROUTE)
		return -1;
	struct rtmsg *r = NLMSG_DATA((struct nlmsghdr *)buf);
	return r->rtm_type == RTN_LOCAL;
}

/* diag_socket asks sock_diag for the one TCP socket of this network namespace
 * that the kernel would give a segment from rip:rport to lip:lport (rport 0:
 * the listener a SYN to lip:lport would reach). It returns 1 with *m filled,
 * 0 when there is none, or -1 when the kernel could not be asked. */
static int diag_socket(int s, int v4, const uint8_t lip[16], int lport, const uint8_t rip[16], int rport,
		       struct inet_diag_msg *m)
{
	static const uint8_t none[16];
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} q;
	memset(&q, 0, sizeof q);
	q.h.nlmsg_len = sizeof q;
	q.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	q.h.nlmsg_flags = NLM_F_REQUEST;
	q.r.sdiag_family = v4 ? AF_INET : AF_INET6;
	q.r.sdiag_protocol = IPPROTO_TCP;
	q.r.idiag_states = ~0u;
	q.r.id.idiag_sport = htons((uint16_t)lport);
	q.r.id.idiag_dport = htons((uint16_t)rport);
	memcpy(q.r.id.idiag_src, v4 ? lip + 12 : lip, v4 ? 4 : 16);
	memcpy(q.r.id.idiag_dst, v4 ? (rip ? rip : none) + 12 : (rip ? rip : none), v4 ? 4 : 16);
	q.r.id.idiag_cookie[0] = q.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	char buf[1024];
	int error = 0;
	int t = nl_ask(s, &q, sizeof q, buf, sizeof buf, &error);
	if (t == NLMSG_ERROR && error == ENOENT)
		return 0;
	if (t != SOCK_DIAG_BY_FAMILY)
		return -1;
	memcpy(m, NLMSG_DATA((struct nlmsghdr *)buf), sizeof *m);
	return 1;
}

struct listener {
	int found;
	unsigned uid, backlog;
};

/* who_listens asks which listener a SYN to ip:port would reach in this
 * network namespace. It returns 0 (l->found says whether there is one) or
 * -1 when the kernel could not be asked. */
static int who_listens(int s, const uint8_t ip[16], int v4, int port, struct listener *l)
{
	struct inet_diag_msg m;
	memset(l, 0, sizeof *l);
	int r = diag_socket(s, v4, ip, port, NULL, 0, &m);
	/* An established socket with this local port (a connection of ours to
	 * it) can be found before the listener: only a listener counts. */
	if (r <= 0 || m.idiag_state != 10)
		return r < 0 ? -1 : 0;
	l->found = 1;
	l->uid = m.idiag_uid;
	l->backlog = m.idiag_wqueue;
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
	struct listener sl, pl;
	int ok = s >= 0 && who_listens(s, ip, v4, sdp_port, &sl) == 0 &&
		 (!sl.found || who_listens(s, ip, v4, app_port, &pl) == 0);
	int err = errno;
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

/* sockaddr16 is addr16 for a socket's own address, with its port. */
static int sockaddr16(const struct sockaddr_storage *ss, uint8_t ip[16], int *port)
{
	if (ss->ss_family == AF_INET)
		*port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
	else if (ss->ss_family == AF_INET6)
		*port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	else
		return -1;
	return addr16((const struct sockaddr *)ss, ip);
}

int trust_peer(int fd, unsigned uid)
{
	/* The listener that took the connection, not the accepted socket: an
	 * accepted socket takes the uid of the process that accepts it (a
	 * worker that dropped privileges), while the listener keeps its
	 * creator's, which is what trust_check compared with P's. */
	struct sockaddr_storage p;
	socklen_t pl = sizeof p;
	uint8_t pip[16];
	int pport;
	if (syscall(SYS_getpeername, fd, &p, &pl) < 0)
		return -1;
	int v4 = sockaddr16(&p, pip, &pport);
	if (v4 < 0)
		return -1;
	pthread_mutex_lock(&diag_mu);
	int s = diag_get();
	struct listener l;
	int r = s < 0 ? -1 : who_listens(s, pip, v4, pport, &l);
	pthread_mutex_unlock(&diag_mu);
	if (r < 0 || !l.found)
		return -1;
	return l.uid == uid;
}
