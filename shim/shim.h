/* shim/shim.h: what the shim's files share. Internal to libsdp.so: nothing here is
 * exported (shim.map lists the exports; everything else is hidden). */
#ifndef LIBSDP_SHIM_H
#define LIBSDP_SHIM_H

#include <arpa/inet.h>
#include <ctype.h>
#include <dlfcn.h>
#include <fnmatch.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <linux/close_range.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <linux/sockios.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "preload/abi.h"
#include "raw.h"
#include "uring.h"
#include "trust.h"
#include "settings.h"

#define EXPORT __attribute__((visibility("default")))


/* ---- types and tables every file of the shim sees */

struct fdent;
struct epset;
struct epreg;
struct rule;

struct shim_real {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*close)(int);
	int (*shutdown)(int, int);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	int (*dup)(int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
};
extern struct shim_real real;

enum { MODE_BOTH, MODE_SDP, MODE_TCP }; /* SDP_MODE's codes: the order of its words */

struct shim_cfg {
	int mode;
	int port_offset;
	int connect_timeout_ms;
	int markers, crc, marker_spacing;
	int buf_size, recv_bufs;
	int log_level;
	int log_fd;
	int log_syslog;
	int stats;
	int fpdu_align;
	int flow_control; /* asked for in the Hello; its code there */
	long zcopy_threshold;
	int shared_memory; /* SDP_SHM: asked for in the Hello */
	int short_tcp;     /* SDP_SHORT_TCP: peers whose connections carry little get TCP */
	int max_conns;
};
extern struct shim_cfg cfg;

enum kind {
	K_NONE = 0,   /* not ours */
	K_CAND,       /* an AF_INET/6 stream socket, nothing decided yet */
	K_TCP,        /* plain TCP, decided (reason says why) */
	K_LISTEN,     /* a listener with a hidden SDP listener */
	K_CONNECTING, /* non-blocking connect to the mapped SDP port in progress */
	K_ACTIVE,     /* connected to an SDP port; engine not attached yet */
	K_PASSIVE,    /* accepted on an SDP port, MPA Request sent; not attached */
	K_SDP,        /* the engine has it */
	K_EPOLL,      /* an epoll instance (see the epoll section) */
	K_ENGINE,     /* the engine's own: close() leaves it open */
	K_HIDDEN,     /* a hidden SDP listener: close() leaves it open */
};

#define REQ_MAX 128

struct fdent {
	_Atomic int kind;
	_Atomic uint32_t gen; /* changes whenever the descriptor is reused */
	struct epset *ep;     /* K_EPOLL: SDP descriptors registered in it */
	int family;
	int hidden;           /* K_LISTEN: the SDP listener */
	int reason;           /* K_TCP: enum sdp_reason */
	int passive;          /* accepted (getsockname shows app_port) */
	uint16_t app_port;    /* the port the application sees */
	pid_t engine_pid;     /* K_SDP: process whose engine owns it */
	struct sockaddr_storage dst; /* connect: the application's address */
	socklen_t dstlen;
	struct sockaddr_storage bound; /* bind: to repeat on a fresh socket */
	socklen_t boundlen;
	int reqlen;
	int shared;           /* dup'ed or inherited before use: may share its socket */
	int sdp_only;         /* a rule says sdp: no TCP fallback, no TCP clients */
	_Atomic unsigned plain_run; /* K_LISTEN: connections in a row that came to P itself (do_accept) */
	int so_error;         /* a failed non-blocking connect, for SO_ERROR */
	int dupped;           /* another descriptor may refer to the same socket */
	_Atomic int epsets;   /* epoll registrations of it, not deleted (epoll.c); 1: a look may say ALONE */
	_Atomic pid_t last_tid;  /* the thread that last waited on it */
	_Atomic int threads;     /* more than one thread has waited on it */
	_Atomic uint32_t wfull;  /* non-blocking sends that found the transport full */
	_Atomic int nb;          /* O_NONBLOCK as set or seen through it; -1: ask the kernel */
	_Atomic unsigned nb_forks; /* forks when nb was learnt: after a fork another process shares it */
	unsigned born_forks;     /* forks when the entry was made: one since means a child shares it */
	int at_eof;              /* accepted on the SDP port already closed by the peer: plain, at EOF */
	int patient;             /* its SDP port is proved P's owner's: no SDP_CONNECT_TIMEOUT */
	unsigned owner_uid;      /* patient: the uid of P's listener, whom the connection must reach */
	int rcvbuf, sndbuf;      /* SO_RCVBUF, SO_SNDBUF as the application set them; 0: never */
	_Atomic int reset_told;  /* ECONNRESET was reported: later calls see EPIPE or end of stream */
	_Atomic int sk_err;      /* K_TCP: the kernel's pending error, which the shim or the engine read
				  * for it (a reset before the handshake): the next call reports it once */
	_Atomic int reconnecting; /* K_TCP: the fallback's connect to P, for a connection the
				   * application saw established, is in progress (settle_reconnect) */
	int nodelay, cork;       /* the application's TCP_NODELAY and TCP_CORK; -1: never set */
	int reuse_app;           /* K_LISTEN: SO_REUSEADDR as the application set it (its twin has 1) */
	int reuse_shown;         /* accepted on a twin: its listener's reuse_app + 1; 0: the kernel's */
	int lowat;               /* SO_RCVLOWAT, kept here for SDP (set_rcvlowat); 1: the default */
	/* SO_RCVTIMEO [0] and SO_SNDTIMEO [1] in ns (0: none), as asked of the
	 * kernel once (call_deadline); -1: not known. Trusted while only this
	 * descriptor of this process can change them (kept_valid). */
	_Atomic int64_t tmo_ns[2];
	_Atomic unsigned tmo_forks;
	_Atomic unsigned tmo_gen; /* setsockopt of either: an answer asked before is stale */
	/* Calls into the engine about it that have returned (engine.c): an
	 * epoll set asks the engine again only about connections that may have
	 * changed since it last asked (epoll.c, epoll_scan). */
	_Atomic uint32_t touched;
	uint8_t req[REQ_MAX];
};

#define FD_MAX 65536
_Static_assert(SET_MAX_CONNECTIONS_MAX == FD_MAX, "SDP_MAX_CONNECTIONS goes up to the table's size");

struct shim_engine {
	sdp_engine_init_fn init;
	sdp_attach_fn attach;
	sdp_sendv_fn sendv;
	sdp_sendv_flags_fn sendv_flags; /* optional: MSG_MORE and zero copy */
	sdp_recvv_fn recvv;
	sdp_poll_fn poll;
	sdp_shutdown_fn shutdown;
	sdp_close_fn close;
	sdp_stats_fn stats;
	sdp_dup_fn dup;
	sdp_query_fn query;
	sdp_take_early_fn take_early;
	sdp_engine_exit_fn exit;
	sdp_recv_cancel_fn recv_cancel; /* optional: Write ZCopy */
	sdp_send_cancel_fn send_cancel; /* optional: Read ZCopy */
	sdp_set_buffers_fn set_buffers; /* optional: SO_SNDBUF, SO_RCVBUF */
	sdp_threads_fn threads;         /* optional: the application's threads using it */
	sdp_short_peer_fn short_peer;   /* optional: peers whose connections carry little */
	sdp_withdraw_fn withdraw;       /* optional: an awake epoll set's sleep announcements */
	sdp_spin_fn spin;               /* optional: an epoll set polls before it sleeps */
};
extern struct shim_engine eng;
void eng_layer(struct shim_engine *below, const struct shim_engine *w);

#define URG_SLOTS 64

/* Threads blocked on one connection sleep each on an eventfd of its own
 * (my_wakefd), which the engine rings for each: their waits have no bound.
 * A thread that could not make one (no descriptor left) shares the
 * connection's, where one thread may empty it just after the engine rang
 * it for another, which then sleeps on: such a thread's waits on a
 * connection that several threads use stay bounded by this much, so that
 * wake-up is late, never lost. */
#define SHARED_WAIT_MS 10

#define URG_WAIT_NS (10 * 1000000LL) /* bounds the wait for a signal to be taken */
#define URG_SEND_NS (1000 * 1000000LL) /* guards the wait for an engine thread to send one (urgent.c) */

enum { ROLE_SERVER, ROLE_CLIENT };

#define EP_TAG 0x5d9f000000000000ULL
#define EP_TAG_MASK 0xffff000000000000ULL

struct epreg {
	int fd;
	uint32_t gen;     /* the descriptor's generation when registered */
	uint32_t events;  /* what the application asked for */
	epoll_data_t data;
	uint32_t last;    /* edge-triggered: what was ready at the last look */
	int kfired;       /* the kernel saw activity since the last look */
	int efd;          /* the connection's eventfd once added to the set, or -1 */
	uint32_t edges;   /* the connection's arrival count at the last look */
	uint32_t wfull;   /* the connection's full-transport count at the last look */
	uint32_t kmask;   /* what the kernel watches the socket for (EP_KBASE, EPOLLOUT) */
	int disabled;     /* EPOLLONESHOT fired, until EPOLL_CTL_MOD */
	uint32_t ready;   /* what was ready at the last look (level-triggered: reported again) */
	uint32_t touched; /* the connection's engine calls counted at the last look (fdent.touched) */
	int64_t due;      /* now_ms() when the engine's own timer for it runs out; -1: none */
	int parked;       /* deleted by the application; the kernel's part kept for its next ADD */
	int ask;          /* look at it at the next wait, quietly: its sleep announcement was taken
			   * back (eng.withdraw), or the application changed it (MOD, ADD after DEL) */
	uint32_t active;  /* the set's returns (epset.returns) when it was last found active */
};

/* What the kernel watches an SDP connection's socket for in an epoll set:
 * arrivals; and room (EPOLLOUT) while the engine waits for it to pass on
 * what the application's sends left queued, so that a set waiting in the
 * kernel wakes when the transport drains (eng.poll's kernel wait). */
#define EP_KBASE (EPOLLIN | EPOLLRDHUP | EPOLLET)

struct epset {
	pthread_mutex_t mu;
	struct epreg *regs;
	int n, cap;
	int tagged; /* the kernel's set has held a tagged word: its waits filter them */
	_Atomic int waiting; /* threads inside epoll_wait on it (epoll_emulated) */
	uint32_t returns;    /* its waits that returned to the application (epoll_withdraw) */
	int peeked;          /* looked at through its descriptor (poll, select, a set holding it) */
	int64_t spin[SDP_SPIN_STATE_WORDS]; /* how long its waits poll before they sleep (eng.spin's state) */
};

extern pthread_mutex_t attach_mu; /* defined in shim/attach.c */
extern pid_t engine_pid; /* defined in shim/engine.c */
extern int engine_failed; /* defined in shim/engine.c */
extern pid_t cached_pid; /* defined in shim/engine.c */
void prog_name_init(void); /* shim/engine.c */
const char *prog_name(void); /* the program's name at exec (shim/engine.c) */
extern _Atomic unsigned n_forks; /* defined in shim/fdtable.c */
extern _Atomic uint64_t n_tcp_conns, n_reasons[SDP_REASON_MAX], n_sockets; /* defined in shim/fdtable.c */
extern struct fdent *_Atomic fdtab[FD_MAX]; /* defined in shim/fdtable.c */
/* fd_end is one past the highest descriptor that has ever had an entry
 * (entries are never freed): the table's scans stop there instead of
 * touching all of its 512 KiB. */
extern _Atomic int fd_end;
extern pthread_once_t real_once; /* defined in shim/libc.c */
extern struct rule *rules; /* defined in shim/rules.c */
extern int n_rules, rules_loaded; /* defined in shim/rules.c */
extern __thread int urg_hold; /* defined in shim/urgent.c */
extern __thread int engine_depth; /* defined in shim/engine.c */
extern _Atomic unsigned urg_sent; /* defined in shim/urgent.c */

/* shim.c */
void adopt_listener(int fd, const char *how);
void adopt_activated(void);
int do_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags);

/* shim/libc.c */
void resolve_real(void);

/* shim/config.c */
void logmsg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
long setting(enum setting_id id);
const char *setting_text(enum setting_id id);
void open_log_path(const char *path);
void read_config(void);

/* shim/fdtable.c */
struct fdent *entry_new(int fd, int kind, int family);
void keep_open(int fd);
void entry_reset(int fd);
const char *reason_name(int r);
void mark_tcp(int fd, struct fdent *e, int reason);
const char *kind_name(int k);
int shim_snapshot(char *buf, int len);
void shim_own_fd(int fd, int own);

/* shim/engine.c */
void hold_engine(void);
int load_engine(void);
void stackbound_engine(void *fn); /* shim/stackbound.c: fn is one of the engine's functions */

/* shim/urgent.c */
int urg_restart(unsigned seen);
int shim_urgent(int fd);
void urg_unhold(void);
void urg_wrap(void);

/* shim/address.c */
int sa_port(const struct sockaddr *sa);
void sa_set_port(struct sockaddr *sa, int port);
int sdp_port(int port);
void ip16(const struct sockaddr *sa, uint8_t out[16]);
int build_request(uint8_t *b, int fd, uint16_t app_port);

/* shim/rules.c */
void load_rules(const char *path);
int rule_mode(int role, const struct sockaddr *sa);
int neg_lookup(const struct sockaddr *sa);
void neg_add(const struct sockaddr *sa);
int short_peer(const struct sockaddr *dst, int app_port);

/* shim/fallback.c */
int is_carried(int level, int name);
void carry_opts(int from, int to);
void lowat_to_kernel(int fd, struct fdent *e);
int64_t now_ms(void);
extern _Atomic int waiters; /* defined in shim/poll.c */
int64_t now_ns(void);
int64_t deadline_ms(int timeout);
int ms_left(int64_t deadline_ns);
void reconnected(struct fdent *e, int r);
int fallback(int fd, struct fdent *e, int reason);
int reason_of(int rc);

/* shim/attach.c */
int nonblock_cached(struct fdent *e);
void nonblock_learnt(struct fdent *e, int v);
int is_nonblocking(int fd);
void attach_siblings(int fd);
int settle_connecting(int fd, struct fdent *e, int may_block);
void claims_map(void);
int attach(int fd, struct fdent *e);

/* shim/transfer.c */
void drain_wakeups(int efd);
int restartable(void);
pid_t my_tid(void);
int lowat_poll(int fd, int need, int want, int *kw, int *tmo, int *efd, uint32_t *edges);
size_t iov_total(const struct iovec *iov, int cnt);
int settle_reconnect(int fd, struct fdent *e, int may_block);
size_t zcopy_min(void);
void timeouts_changed(struct fdent *e);
/* kept_valid says whether what an entry keeps of its socket (O_NONBLOCK,
 * the timeouts), learnt when the process had made `forks` forks, still
 * holds: no other descriptor (dup, inherited) or process (a fork since)
 * can have changed it past the hooks. */
static inline int kept_valid(const struct fdent *e, unsigned forks)
{
	return !e->dupped && !e->shared && forks == atomic_load(&n_forks);
}
/* is_timeout_opt: SO_RCVTIMEO or SO_SNDTIMEO, either layout of its value. */
static inline int is_timeout_opt(int name)
{
	return name == SO_RCVTIMEO || name == SO_SNDTIMEO
#ifdef SO_RCVTIMEO_NEW
	       || name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW
#endif
#ifdef SO_RCVTIMEO_OLD
	       || name == SO_RCVTIMEO_OLD || name == SO_SNDTIMEO_OLD
#endif
		;
}
int reset_once(struct fdent *e, int err, int send);
ssize_t sdp_sendv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags);
ssize_t sdp_recvv(int fd, struct fdent *e, const struct iovec *iov, int cnt, int flags);
void listener_tcp_only(int fd, struct fdent *e, const char *why);
int peer_is_owner(int fd, struct fdent *e);
int resolve_connecting(int fd, struct fdent *e, short revents);
int move_high(int fd);
void grow_fd_table(void);
void shim_hidden(int fd);

/* shim/lifecycle.c */
int set_rcvlowat(int fd, struct fdent *e, const void *val, socklen_t len);

/* shim/poll.c */
int poll_emulated(struct pollfd *fds, nfds_t n, int timeout);

/* shim/epoll.c */
int epset_count(struct epset *ep);
int my_wakefd(void);          /* shim/transfer.c */
static inline int own_flag(int wakefd)
{
	return wakefd >= 0 ? SDP_POLL_OWN : 0;
}
void wakefd_after_fork(void); /* shim/transfer.c */
void epset_clear(struct fdent *e);
int tcp_ready(int fd, struct fdent *e, short want, uint32_t *edges);
void epoll_follow(int fd, struct fdent *e);
int epoll_peek(struct epset *ep);

/* shim/passfd.c */
int pass_out(const struct msghdr *msg);
void pass_in(const struct msghdr *msg);

/* shim/exec.c */
int adopt_record(int fd, int k, int fam, int passive, unsigned port, int hidden, const char *hex);
void shim_settling(int delta);
void drain_unused_at_exit(void); /* shim/lifecycle.c */

/* ---- small functions every file inlines */
static inline void need_real(void);
static inline struct fdent *ours(int fd);
static inline pid_t my_pid(void);
static inline int shares_parents_memory(void);
static inline int engine_usable_by(pid_t me);
static inline int engine_usable(void);
static inline int is_sdp_io(struct fdent *e);
static inline int via_shim(struct fdent *e);

static inline void need_real(void)
{
	if (__builtin_expect(real.close == NULL, 0))
		pthread_once(&real_once, resolve_real);
}

/* ours returns the entry of fd when it is one of our sockets. */
static inline struct fdent *ours(int fd)
{
	if ((unsigned)fd >= FD_MAX)
		return NULL;
	struct fdent *e = atomic_load_explicit(&fdtab[fd], memory_order_acquire);
	if (!e || atomic_load_explicit(&e->kind, memory_order_relaxed) == K_NONE)
		return NULL;
	return e;
}

/* fd_touched counts a change of e that epoll sets must ask the engine
 * about again (fdent.touched; epoll.c, unchanged). */
static inline void fd_touched(struct fdent *e)
{
	atomic_fetch_add_explicit(&e->touched, 1, memory_order_release);
}

static inline pid_t my_pid(void)
{
	return cached_pid ? cached_pid : getpid();
}

/* shares_parents_memory: this is a child running in its parent's memory
 * (vfork, as Python's subprocess and posix_spawn use, until it execs): the
 * table and the engine are the parent's, whose descriptors stay open
 * whatever the child closes or replaces, so the child leaves them alone.
 * (A child made by a raw clone without fork's handlers is taken for one:
 * its own copy of the table goes stale, which harms nothing.) */
static inline int shares_parents_memory(void)
{
	return cached_pid && getpid() != cached_pid;
}

/* engine_usable says whether this process may use SDP: a process whose
 * parent loaded the engine inherits a Go runtime that did not survive fork. */
static inline int engine_usable_by(pid_t me)
{
	return !engine_failed && (engine_pid == 0 || engine_pid == me);
}

static inline int engine_usable(void)
{
	return engine_usable_by(getpid());
}

/* is_sdp_io says whether data calls on e go to the engine. */
static inline int is_sdp_io(struct fdent *e)
{
	int k = atomic_load_explicit(&e->kind, memory_order_relaxed);
	return k == K_SDP || k == K_ACTIVE || k == K_PASSIVE || k == K_CONNECTING;
}

/* via_shim says whether a data call on e goes through sdp_recvv/sdp_sendv:
 * those of the engine, and a TCP one with a pending error to report or a
 * reconnection to settle. */
static inline int via_shim(struct fdent *e)
{
	return is_sdp_io(e) || atomic_load_explicit(&e->sk_err, memory_order_relaxed) ||
	       atomic_load_explicit(&e->reconnecting, memory_order_relaxed);
}

#endif
