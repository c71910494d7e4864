/* ipv6.c: IPv6. An AF_INET6 listener on ::1 with an AF_INET6 client, and an
 * AF_INET6 listener on ::ffff:127.0.0.1 (IPV6_V6ONLY off) reached by a
 * v4-mapped AF_INET6 client and by an AF_INET client. Addresses seen by
 * accept, getsockname and getpeername are checked. Three connections. */
#include "capi.h"

static void setup(struct ctx *c)
{
	c->lfd[0] = listen_on(AF_INET6, "::1", 1, &c->port[0]);
	c->lfd[1] = listen_on(AF_INET6, "::ffff:127.0.0.1", 0, &c->port[1]);
	c->nl = 2;
}

static void check_addr(const struct sockaddr_storage *ss, socklen_t len, int family, const char *ip, int port)
{
	char buf[64];
	EQ(ss->ss_family, family);
	EQ(len, family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	CHECK(!strcmp(sa_ip(ss, buf, sizeof buf), ip), "address %s, want %s", buf, ip);
	if (port >= 0)
		EQ(sa_port(ss), port);
}

static void serve(int lfd, int port, const char *peer_ip, uint32_t seed)
{
	struct sockaddr_storage pa, la;
	socklen_t pl = sizeof pa, ll = sizeof la;
	int fd;
	do {
		fd = accept(lfd, (struct sockaddr *)&pa, &pl);
	} while (fd < 0 && errno == EINTR);
	CHECK(fd >= 0, "accept");
	check_addr(&pa, pl, AF_INET6, peer_ip, -1);
	EQ(peer_port(fd), sa_port(&pa));
	SYS(getsockname(fd, (struct sockaddr *)&la, &ll));
	check_addr(&la, ll, AF_INET6, peer_ip, port);
	uint32_t cport;
	READ_EXACT(fd, &cport, sizeof cport);
	EQ(cport, sa_port(&pa)); /* the client's getsockname port */
	RECV_PAT(fd, 1 << 20, seed, 0);
	SEND_PAT(fd, 1 << 20, seed + 1, 0);
	EXPECT_EOF(fd);
	SYS(close(fd));
}

static void server(struct ctx *c)
{
	serve(c->lfd[0], c->port[0], "::1", 101);
	serve(c->lfd[1], c->port[1], "::ffff:127.0.0.1", 103);
	serve(c->lfd[1], c->port[1], "::ffff:127.0.0.1", 105);
	SYS(close(c->lfd[0]));
	SYS(close(c->lfd[1]));
}

static void use(int family, const char *ip, int port, uint32_t seed)
{
	int fd = connect_to(family, ip, port, 0);
	struct sockaddr_storage pa, la;
	socklen_t pl = sizeof pa, ll = sizeof la;
	SYS(getpeername(fd, (struct sockaddr *)&pa, &pl));
	check_addr(&pa, pl, family, ip, port);
	SYS(getsockname(fd, (struct sockaddr *)&la, &ll));
	check_addr(&la, ll, family, ip, -1);
	uint32_t cport = (uint32_t)sa_port(&la);
	WRITE_ALL(fd, &cport, sizeof cport);
	SEND_PAT(fd, 1 << 20, seed, 0);
	RECV_PAT(fd, 1 << 20, seed + 1, 0);
	SYS(close(fd));
}

static void client(struct ctx *c)
{
	CHECK(c->nl == 2, "two ports");
	use(AF_INET6, "::1", c->port[0], 101);
	use(AF_INET6, "::ffff:127.0.0.1", c->port[1], 103);
	use(AF_INET, "127.0.0.1", c->port[1], 105);
}
