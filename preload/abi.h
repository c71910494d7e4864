/* The C ABI between the preload shim (shim.c and shim/, build/libsdp.so) and the Go
 * engine (build/libsdp-engine.so, loaded with dlopen on first SDP use).
 *
 * Every call takes the application's descriptor, which is the connection's
 * kernel socket. Calls never block: a result of -EAGAIN means "ask sdp_poll
 * what to wait for". Results below zero are negated errno values, or
 * -(SDP_FALLBACK + reason): the connecting side found no SDP peer and the
 * engine has let go of the descriptor; the shim reconnects it over TCP. */
#ifndef LIBSDP_ABI_H
#define LIBSDP_ABI_H

#include <stdint.h>
#include <sys/uio.h>

#define SDP_ABI_VERSION 3

#define SDP_FALLBACK 100000
enum sdp_reason {
	SDP_REASON_NONE = 0,
	SDP_REASON_TIMEOUT = 1,    /* no MPA Request within SDP_CONNECT_TIMEOUT */
	SDP_REASON_FOREIGN = 2,    /* the mapped port spoke something else */
	SDP_REASON_VERSION = 3,    /* an SDP peer we cannot talk to */
	SDP_REASON_REFUSED = 4,    /* nothing listens on the mapped port */
	SDP_REASON_RULE = 5,       /* SDP_MODE or a rule says tcp */
	SDP_REASON_PLAIN_PEER = 6, /* accepted on the application's own port */
	SDP_REASON_AFTER_FORK = 7, /* the engine belongs to a parent process */
	SDP_REASON_ENGINE = 8,     /* the engine could not be loaded */
	SDP_REASON_CACHED = 9,     /* an earlier attempt to this peer fell back */
	SDP_REASON_SDP_PORT = 10,  /* the mapped port could not be bound */
	SDP_REASON_LIMIT = 11,     /* SDP_MAX_CONNECTIONS reached */
	SDP_REASON_UNTRUSTED = 12, /* the mapped port is not the application port owner's */
	SDP_REASON_REMOTE = 13,    /* another host that SDP_TRUST_REMOTE does not name */
	SDP_REASON_PEER_CLOSED = 14, /* accepted on the SDP port, closed by the peer before any byte */
	SDP_REASON_SHORT = 15,     /* this process's last connections to the peer each carried little */
	SDP_REASON_MAX
};
/* Added to SDP_REASON_PEER_CLOSED: the peer left by a reset, whose report
 * the engine's read took from the kernel; the shim gives it to the
 * application's next call once, as the kernel would have. */
#define SDP_FALLBACK_RESET 0x400

enum sdp_role { SDP_ROLE_ACTIVE = 0, SDP_ROLE_PASSIVE = 1 };
/* Or'ed into SDP_ROLE_ACTIVE: the kernel showed that the SDP port belongs to
 * the application port owner's SDP listener (shim/trust.c), so its MPA
 * Request is waited for as long as TCP waits for a reply, without
 * SDP_CONNECT_TIMEOUT: a server that accepts late keeps SDP. */
#define SDP_ROLE_PATIENT 0x100

struct sdp_engine_config {
	int32_t abi_version;
	int32_t log_fd;
	int32_t log_level; /* 0 error, 1 warn, 2 info, 3 debug */
	int32_t markers;
	int32_t crc;
	int32_t marker_spacing;
	int32_t buf_size;
	int32_t recv_bufs;
	int32_t connect_timeout_ms;
	char prog[64];
	/* The shim's view of every socket of the process, for sdpstat: one line
	 * per descriptor, "fd=N kind=K transport=T reason=R local=A remote=A
	 * sdp_port=P", addresses as the application sees them. Returns the
	 * length written (at most len - 1, NUL-terminated). */
	int (*snapshot)(char *buf, int len);
	int32_t fpdu_align; /* SDP_FPDU_ALIGN: 0 off (FPDUs up to 64 KiB, TCP cuts the stream), 1 on (one FPDU per TCP segment, MSG_EOR), 2 auto (on where the peer is on another host) */
	/* The engine reports descriptors it opens (own = 1) and is about to
	 * close (own = 0): close() by the application leaves them alone. */
	void (*own_fd)(int fd, int own);
	/* fd >= 0: a new urgent mark arrived on fd (the connection is locked:
	 * the shim only notes it); the result is 1 when no application thread
	 * is inside the engine to send SIGURG on its way out, and an engine
	 * thread must then call again with fd = -1 once nothing is locked.
	 * fd = -1: send SIGURG for the noted marks (see shim/urgent.c). */
	int (*urgent)(int fd);
	/* delta +1: a closed connection's socket stays open until the peer has
	 * everything and will send nothing more; -1: it has (Settled in
	 * sdpcore). The shim's _exit waits, bounded, for the count to reach 0
	 * without calling into the engine. */
	void (*settling)(int delta);
};

/* Function types the shim resolves with dlsym. */
typedef int (*sdp_engine_init_fn)(const struct sdp_engine_config *cfg);
/* How many connections to addr (16 octets, IPv4 as v4-mapped) at port (the
 * SDP port they would go to), the one about to be made first, should go over
 * plain TCP before the engine is asked again: this process's last connections
 * there each carried too little for SDP's set-up to pay
 * (preload/shortconns.go); 0: this one goes over SDP. Optional. */
typedef int (*sdp_short_peer_fn)(const uint8_t *addr, int port);
/* For an epoll set whose wait ended (for anything): over shared memory,
 * each of the n connections fds whose look announced sleep to the peer
 * takes the announcement back, so that the peer does not ring the doorbell
 * while the set's thread is awake; done[i] = 1 for those, which the set must
 * look at again before it sleeps (their next bytes ring nothing). A
 * connection on which a thread sleeps (a blocking call, poll, select) keeps
 * its announcement. Returns how many were taken back. Optional. */
typedef int (*sdp_withdraw_fn)(const int *fds, int n, uint8_t *done);
/* For an epoll set about to sleep: over shared memory, each of the n
 * connections fds on which no thread sleeps takes its sleep announcement
 * back (done[i] = 1: the set must look at it again before it sleeps), and
 * the caller polls their rings for the peers' next bytes, for at most
 * SDP_POLL_US as state adapts it (the set's own SDP_SPIN_STATE_WORDS words,
 * zero at first, which only the engine reads and writes: sdpcore.SpinState),
 * asking the kernel about epfd now and then. Returns 1 when a peer
 * published, 0 when the poll ended without (or epfd became readable); the
 * set looks at the connections marked in done either way. Optional. */
#define SDP_SPIN_STATE_WORDS 3
typedef int (*sdp_spin_fn)(const int *fds, int n, int epfd, int64_t *state, uint8_t *done);
typedef int (*sdp_attach_fn)(int fd, int role, const uint8_t *request, int request_len);
typedef int64_t (*sdp_sendv_fn)(int fd, const struct iovec *iov, int iovcnt);
typedef int64_t (*sdp_recvv_fn)(int fd, const struct iovec *iov, int iovcnt, int flags);
/* sdp_sendv with send flags: SDP_SEND_MORE (MSG_MORE) holds the bytes until a
 * send without it (at most 200 ms); SDP_SEND_WAIT says the caller blocks
 * until all is sent, so the buffers stay valid for the whole call and a
 * large one may go by zero copy (the call then returns when the peer has
 * read it, or has asked for buffer copy). Optional: the shim may use
 * sdp_sendv. */
typedef int64_t (*sdp_sendv_flags_fn)(int fd, const struct iovec *iov, int iovcnt, int flags);
/* No buffers and no flags: send now what SDP_SEND_MORE held (TCP_CORK
 * cleared). */
#define SDP_SEND_MORE 1
#define SDP_SEND_WAIT 2
/* SDP_SEND_OOB (MSG_OOB): the last byte is urgent data. */
#define SDP_SEND_OOB 4
/* *edges counts arrivals (data, end of stream, errors, room to send):
 * edge-triggered epoll reports a ready descriptor again only when it moved.
 * Returns the ready events among want (plus POLLERR/POLLHUP), and in *wait
 * the kernel events to wait for on fd and in *timeout_ms how long at most
 * (-1: no limit) before asking again. When nothing wanted is ready, *efd is
 * an eventfd to wait on too (POLLIN): it fires when another thread's call
 * changed the connection (it may have read the bytes this thread waits for).
 * A caller that passes neither flag below gets *efd whatever is ready: an
 * edge-triggered waiter waits for what is new, not for what is ready. */
typedef int (*sdp_poll_fn)(int fd, int want, int *wait, int *timeout_ms, int *efd, uint32_t *edges);
/* Flags for sdp_poll's want. The eventfd is rung only while a thread
 * sleeps on it: SDP_POLL_SLEEP says the caller will sleep on *efd when
 * nothing wanted is ready (it is then counted as a sleeper), and
 * SDP_POLL_WOKE that it slept after the previous such call and is back.
 * SDP_POLL_WOKE alone only ends that sleep. A caller that passes neither
 * gets the eventfd rung on every change of the connection from then on. */
#define SDP_POLL_SLEEP 0x100000
#define SDP_POLL_WOKE 0x200000
/* SDP_POLL_BLOCK (with SDP_POLL_SLEEP): the caller comes from a data call
 * on fd and, when nothing wanted is ready, blocks until the socket is
 * readable before it asks again (SDP_POLL_WOKE): the engine may skip a
 * read that would only find the socket empty. */
#define SDP_POLL_BLOCK 0x400000
/* SDP_POLL_OWN (with SDP_POLL_SLEEP or SDP_POLL_WOKE): *efd holds, on the
 * way in, an eventfd of the calling thread's own, which the engine rings
 * instead of the connection's while the caller sleeps and returns in *efd:
 * a thread that wakes empties only its own, never another's wake-up. */
#define SDP_POLL_OWN 0x800000
/* SDP_POLL_QUIET (without SDP_POLL_SLEEP): the kernel has reported nothing
 * on fd's socket since the caller's last look (an epoll set's look before
 * it waits): a read that would only find the socket, or the shared-memory
 * ring, empty again may be skipped. The caller's wait on the socket sees
 * whatever did come. */
#define SDP_POLL_QUIET 0x1000000
/* SDP_POLL_ALONE (without SDP_POLL_SLEEP): the caller's epoll set is the
 * only waiter on the connection that passes neither SDP_POLL_SLEEP nor
 * SDP_POLL_WOKE, and it reports what this look finds: the look's own
 * changes (what it read) do not ring the eventfd for it. */
#define SDP_POLL_ALONE 0x2000000
/* SDP_POLL_LEVEL (without SDP_POLL_SLEEP): the look is for a level-triggered
 * epoll registration, which reports readiness again at the next look
 * whatever arrived since: a look that only reads (POLLIN, POLLPRI) may then
 * stop at the first data, as poll's does, and leave a large message in the
 * shared-memory ring for the receive that follows to read into place. */
#define SDP_POLL_LEVEL 0x4000000
/* SDP_POLL_RECV (with SDP_POLL_BLOCK): the caller is a blocking receive that
 * reads right after its wait. Back from it (SDP_POLL_WOKE), the engine may
 * report POLLIN without reading the socket, so that the receive reads large
 * messages into its own buffer (over iWARP with markers); if nothing came
 * for it, the receive says EAGAIN and the caller waits again. */
#define SDP_POLL_RECV 0x8000000
/* SDP_POLL_SPIN (with SDP_POLL_SLEEP, not SDP_POLL_WOKE): the caller, a
 * poll or select of one connection that would wait, may poll the
 * connection's shared-memory ring first, as a blocking call does
 * (SDP_POLL_US), so that a quick answer needs no doorbell. */
#define SDP_POLL_SPIN 0x10000000
/* SDP_POLL_SPUN (with SDP_POLL_SLEEP and SDP_POLL_BLOCK): the receive just
 * before this look polled the ring already (SDP_RECV_SPIN): the look does
 * not poll it again before the caller sleeps. */
#define SDP_POLL_SPUN 0x20000000
typedef int (*sdp_shutdown_fn)(int fd, int how);
typedef int (*sdp_close_fn)(int fd);
/* Makes newfd a second descriptor of oldfd's connection (dup). */
typedef int (*sdp_dup_fn)(int oldfd, int newfd);
/* Answers ioctl-style questions: SDP_QUERY_INQ (bytes readable now) and
 * SDP_QUERY_OUTQ (bytes not yet handed to the kernel). */
typedef int64_t (*sdp_query_fn)(int fd, int what);
#define SDP_QUERY_INQ 1
#define SDP_QUERY_OUTQ 2
/* SDP_QUERY_ATMARK: 1 when the next byte to read is the urgent byte (SIOCATMARK). */
#define SDP_QUERY_ATMARK 3
/* SDP_QUERY_ERROR: the errno the connection failed with, 0 while it works (SO_ERROR). */
#define SDP_QUERY_ERROR 4
/* SDP_QUERY_RXSTALL: 1 when the bytes readable now are all the connection
 * takes before the application reads some: the peer has no room left to
 * send into (credits, the ring) or the engine holds its most. The shim's
 * SO_RCVLOWAT then gives way, as TCP's does once its window is closed. An
 * engine without it answers -EINVAL. */
#define SDP_QUERY_RXSTALL 5
/* After a fallback: moves into buf up to len of the bytes the application
 * had sent before it, which the shim sends first over TCP. Returns the
 * count, 0 when none are left. */
typedef int64_t (*sdp_take_early_fn)(int fd, char *buf, int len);
/* Writes the engine's counters as "key=value ..." into buf. */
typedef int (*sdp_stats_fn)(char *buf, int len);
/* Called once when the process exits: removes its sdpstat file. */
typedef int (*sdp_engine_exit_fn)(void);

/* Flags for sdp_recvv. SDP_RECV_WAIT: the caller blocks until data comes,
 * so the buffers stay valid for the whole call and a zero-copy offer of
 * the peer may be RDMA-Read straight into them. */
#define SDP_RECV_PEEK 1
#define SDP_RECV_WAIT 2
/* SDP_RECV_OOB (MSG_OOB): read the urgent byte; never waits.
 * SDP_RECV_FILL: the call has already returned bytes to the application
 * and goes on for what else is there (or for MSG_WAITALL): at the urgent
 * mark it returns 0, and the call ends there, as on TCP. */
#define SDP_RECV_OOB 4
#define SDP_RECV_FILL 8
/* SDP_RECV_BLOCK: the call blocks when nothing is ready (it waits with
 * wait_ready's SDP_POLL_BLOCK on -EAGAIN): the engine may skip a read that
 * would only find the socket empty again. */
#define SDP_RECV_BLOCK 16
/* SDP_RECV_WOKE: the caller comes back from a wait in which sdp_poll
 * (SDP_POLL_SLEEP) counted it as a sleeper; the receive ends that sleep
 * first, as sdp_poll with SDP_POLL_WOKE would, and reads (SDP_RECV_BLOCK
 * is not passed with it). The caller's own eventfd (SDP_POLL_OWN), or -1,
 * rides in the flags' high bits: SDP_RECV_WOKE_OWN(efd). A blocking receive
 * so makes one call into the engine when it wakes, not a look and a read. */
#define SDP_RECV_WOKE 32
/* SDP_RECV_SPIN (with SDP_RECV_BLOCK, without SDP_RECV_WAIT; the shim
 * decides, the engine obeys): a receive that finds nothing polls
 * the connection's shared-memory ring as the wait's first look would
 * (SDP_POLL_US, adapting), and reads what came in the same call: a quick
 * answer costs one call into the engine, not a receive, a look and a
 * receive. Its -EAGAIN means the ring was polled: the wait's first look
 * passes SDP_POLL_SPUN. */
#define SDP_RECV_SPIN 64
#define SDP_RECV_OWN_SHIFT 8
/* An eventfd at or above SDP_RECV_OWN_MAX does not fit: its sleep ends in
 * sdp_poll (SDP_POLL_WOKE), as without SDP_RECV_WOKE. */
#define SDP_RECV_OWN_MAX (1 << 22)
#define SDP_RECV_WOKE_OWN(efd) (SDP_RECV_WOKE | (((efd) + 1) << SDP_RECV_OWN_SHIFT))

/* Zero-copy receive. A blocking recv (SDP_RECV_WAIT) that finds nothing
 * buffered may offer its buffer to the peer (SinkAvail, Write ZCopy), or
 * RDMA-Read the peer's offer into it (Read ZCopy), and answer -EAGAIN: the
 * caller waits as for any -EAGAIN (sdp_poll) and calls sdp_recvv again
 * with the same buffers, which then returns what the peer wrote into them.
 * A call that ends instead (a signal, an error) must first call
 * sdp_recv_cancel with those buffers: afterwards the peer never touches
 * them. It returns the bytes already written into them, which the call
 * returns, or 0 (the call ends with its error). The shim's Hello carries
 * SDP_CAP_WRITE_ZCOPY (Hello Header byte 1, low nibble) because it does
 * so; the engine, from the same build, offers only when both Hello and
 * HelloAck carry it. */
typedef int64_t (*sdp_recv_cancel_fn)(int fd, const struct iovec *iov, int iovcnt);

/* Read ZCopy. A blocking send (SDP_SEND_WAIT) of at least the threshold
 * may offer its first buffer to the peer (SrcAvail, at most 4 MiB of it)
 * and answer -EAGAIN: the caller waits (sdp_poll reports POLLOUT once the
 * peer answered, and a timeout for the engine's cancel timer) and calls
 * sdp_sendv_flags again with the same buffers, which returns the bytes
 * taken. A call that ends instead (a signal, an error) must first call
 * sdp_send_cancel with those buffers: the engine copies what the peer has
 * not read yet, sends SrcAvailCancel and finishes the transfer by itself,
 * so the peer never reads the buffers again. It returns the bytes the call
 * returns (all of the offer: taken, as a TCP send buffer takes bytes), or
 * 0 when there was no offer (the call ends with its error). */
typedef int64_t (*sdp_send_cancel_fn)(int fd, const struct iovec *iov, int iovcnt);
#define SDP_CAP_WRITE_ZCOPY 0x04
/* Shared memory between two processes on one host (SDP_SHM): the shim's
 * Hello carries it when the setting is on; the engine reads the same
 * setting and takes the connecting side's offer (docs/PROTOCOL.md). */
#define SDP_CAP_SAME_HOST 0x08

/* The application's SO_SNDBUF and SO_RCVBUF on fd, as it passed them to
 * setsockopt (0: never set): the engine then keeps no more than the kernel
 * would for those sizes (sdpcore/bufsize.go). Called just before
 * sdp_attach (the engine keeps them for that descriptor's connection, which
 * starts with them), after it, and on every later setsockopt of either. */
typedef int (*sdp_set_buffers_fn)(int fd, int sndbuf, int rcvbuf);

/* How many of the application's threads have called into the engine and
 * not ended, told when a thread makes its first call: the engine keeps a P
 * of its runtime for each, at the highest count (preload/procs.go), so that
 * no call waits for one. */
typedef int (*sdp_threads_fn)(int n);

#endif
