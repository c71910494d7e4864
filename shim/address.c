/* shim/address.c: addresses, ports and the MPA Request with the SDP Hello. */
#include "shim.h"

/* ---- addresses and ports ------------------------------------------------ */

int sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return -1;
}

void sa_set_port(struct sockaddr *sa, int port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

/* sdp_port maps an application port to its SDP port, wrapped into
 * 1024..65535 so that ephemeral listeners have one too. */
int sdp_port(int port)
{
	int span = 65536 - 1024;
	return ((port - 1024 + cfg.port_offset) % span + span) % span + 1024;
}

void ip16(const struct sockaddr *sa, uint8_t out[16])
{
	memset(out, 0, 16);
	if (sa->sa_family == AF_INET)
		memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa->sa_family == AF_INET6)
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }
static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

/* hello_flow_control is the flow-control byte of the Hello (HH byte 14):
 * 0x80 | mode asked for (0 credit, 1 rdma, 2 nic, 3 transport: SDP_FLOW_CONTROL's
 * codes). The engine reads the same setting and logs a bad value. */
static uint8_t hello_flow_control(void)
{
	return 0x80 | cfg.flow_control;
}

/* hello_local says whether the Hello's destination dst (the connecting
 * side) is on this host: 127.0.0.0/8 (plain or v4-mapped), ::1, or the
 * source src itself (sdpcore's Hello.Local). */
static int hello_local(const uint8_t *src, const uint8_t *dst)
{
	static const uint8_t zero[16], one[16] = { [15] = 1 };
	int v4 = !memcmp(dst, zero, 10) && ((dst[10] == 0 && dst[11] == 0) || (dst[10] == 0xff && dst[11] == 0xff));
	return memcmp(dst, zero, 16) && ((v4 && dst[12] == 127) || !memcmp(dst, one, 16) || !memcmp(dst, src, 16));
}

/* build_request writes the MPA Request carrying the SDP Hello (RFC 5044
 * §7.1.1; layout in docs/PROTOCOL.md §2). sdpcore.AppendRequest is the reference
 * encoder and the engine parses these exact bytes back. */

int build_request(uint8_t *b, int fd, uint16_t app_port)
{
	struct sockaddr_storage l, p;
	socklen_t ll = sizeof l, pl = sizeof p;
	memset(&l, 0, sizeof l);
	memset(&p, 0, sizeof p);
	real.getsockname(fd, (struct sockaddr *)&l, &ll);
	real.getpeername(fd, (struct sockaddr *)&p, &pl);
	const int pdlen = 16 + 48;
	memset(b, 0, 20 + pdlen);
	memcpy(b, "MPA ID Req Frame", 16);
	b[17] = 1;
	put16(b + 18, pdlen);
	uint8_t *bsdh = b + 20, *hh = b + 36;
	bsdh[0] = 0x00; /* Hello */
	put16(bsdh + 2, cfg.recv_bufs);
	put32(bsdh + 4, pdlen);
	int v6 = l.ss_family == AF_INET6 &&
		 !IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&l)->sin6_addr);
	hh[0] = 0x11;
	hh[1] = (v6 ? 6 : 4) << 4;
	if (zcopy_min() > 0) /* as the engine's Hello: no zero copy, no Write ZCopy */
		hh[1] |= SDP_CAP_WRITE_ZCOPY; /* sdp_recvv ends a Write ZCopy wait by sdp_recv_cancel */
	if (cfg.shared_memory) /* the engine, from the same settings, takes an offer */
		hh[1] |= SDP_CAP_SAME_HOST;
	hh[3] = 1;
	hh[14] = hello_flow_control();
	put32(hh + 4, cfg.buf_size);
	put32(hh + 8, cfg.buf_size);
	put16(hh + 12, app_port);
	ip16((struct sockaddr *)&l, hh + 16);
	ip16((struct sockaddr *)&p, hh + 32);
	/* A peer on this host, with shared memory allowed: no network for
	 * markers and CRC to guard against (sdpcore.AppendRequest). */
	int plain = cfg.shared_memory && hello_local(hh + 16, hh + 32);
	b[16] = (cfg.markers && !plain ? 0x80 : 0) | (cfg.crc && !plain ? 0x40 : 0);
	return 20 + pdlen;
}
