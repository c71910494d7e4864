/* Who may answer a connection (SECURITY.md): before a preloaded client
 * connects to the SDP port S(P) of a destination's port P, it asks whether
 * the listener there is the SDP twin of P's own listener. On this host the
 * kernel answers (sock_diag); another host is trusted only where the
 * operator said so (SDP_TRUST_REMOTE). Nothing here calls an interposed
 * function. */
#ifndef LIBSDP_SHIM_TRUST_H
#define LIBSDP_SHIM_TRUST_H

#include <stddef.h>
#include <sys/socket.h>

enum sdp_trust {
	TRUST_SDP,          /* S(P) is the twin of P's listener, by the kernel's word: connect over SDP */
	TRUST_VOUCHED,      /* another host that SDP_TRUST_REMOTE names: connect over SDP */
	TRUST_NO_LISTENER,  /* nothing listens on S(P) (or on P) on this host */
	TRUST_OTHER_OWNER,  /* S(P) belongs to another user than P */
	TRUST_NOT_TWIN,     /* S(P) is P's owner's, but not P's SDP listener */
	TRUST_REMOTE,       /* another host, not in SDP_TRUST_REMOTE */
	TRUST_UNKNOWN,      /* the kernel could not be asked */
};

/* trust_init parses SDP_TRUST_REMOTE's value: unset or empty trusts no
 * other host, "*" every one, else a comma-separated list of address[/bits].
 * It returns 0, or -1 after writing why into err (the list is then empty). */
int trust_init(const char *spec, char *err, size_t errlen);

/* trust_check says whether a connection to dst (any port) may go to the SDP
 * port sdp_port for the application port app_port. detail gets one line
 * for the log when the answer is not TRUST_SDP. */
int trust_check(const struct sockaddr *dst, int app_port, int sdp_port, char *detail, size_t n, unsigned *uid);

/* trust_peer says whether the listener on dst's host at sdp_port, which
 * has just taken a connection that trust_check let go there, belongs to
 * uid: 1 yes, 0 it is another user's, -1 when it cannot be told (it is
 * gone). It closes the instant between trust_check and connect(), in which
 * the SDP port could change hands: the connection is checked as made,
 * before a byte is sent on it. */
int trust_peer(const struct sockaddr *dst, int sdp_port, unsigned uid);

/* trust_keep gives the checks a way to keep their own descriptor away from
 * the application's (the shim moves it high and guards it from close()),
 * and has a child after fork() use a socket of its own on it. */
void trust_keep(int (*keep)(int fd));

/* twin_backlog is the backlog an SDP twin listener uses beside a listener
 * that asked for backlog: it differs from the kernel's effective value for
 * the application's listener in the way trust_check looks for. */
int twin_backlog(int backlog);

/* listener_backlog is the backlog the kernel keeps for the listener bound
 * to local (getsockname's address), or -1: what an SDP twin is made
 * beside for a listener the shim did not see listen(). */
int listener_backlog(const struct sockaddr *local);

#endif
