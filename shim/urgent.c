/* shim/urgent.c: SIGURG for urgent data. */
#include "shim.h"

/* ---- SIGURG for urgent data ---------------------------------------------
 *
 * When a new urgent mark arrives the kernel signals a TCP socket's owner
 * (F_SETOWN, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP; these reach the kernel
 * socket under an SDP descriptor too). The engine finds the mark with the
 * connection locked and only notes it here (shim_urgent); the signal is
 * sent once nothing is locked, and so that the application's handler never
 * runs inside Go code (on a goroutine stack, or calling back into the
 * engine from there):
 *
 *  - an application thread leaving an engine call (the mark came in its
 *    call) signals itself when the owner is its process or itself and it
 *    does not block SIGURG: the handler runs before the call returns;
 *  - otherwise (async progress, or the thread cannot take it) the signal
 *    goes out while no application thread is inside the engine, and threads
 *    that would enter wait (urg_gate) until the signal was taken, which
 *    they can do themselves in C. Go's threads block SIGURG.
 *
 * Every engine call of the application goes through the eng_urg wrappers
 * (urg_enter, urg_leave), which count the threads inside. */
static _Atomic int urg_slot[URG_SLOTS]; /* fd + 1 of a noted mark, 0: free */
static _Atomic int urg_noted;           /* marks noted, not yet signalled */
static _Atomic int urg_inside;          /* application threads inside the engine */
static _Atomic int urg_gate;            /* a signal is on its way: stay out */
static _Atomic int urg_sending;         /* engine threads that took a mark and have not sent its signal */

static void urg_note(int fd)
{
	for (int i = 0; i < URG_SLOTS; i++) {
		int z = 0;
		if (atomic_compare_exchange_strong(&urg_slot[i], &z, fd + 1)) {
			atomic_fetch_add(&urg_noted, 1);
			return;
		}
	}
	/* More marks waiting than slots: their signals would merge anyway. */
}

/* urg_pending reads whether SIGURG is pending from /proc: in the process's
 * shared set (tid 0) or in one thread's own set. */
static int urg_pending(pid_t tid)
{
	char path[64];
	if (tid)
		snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
	else
		snprintf(path, sizeof path, "/proc/self/status");
	const char *key = tid ? "SigPnd:" : "ShdPnd:";
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096];
	ssize_t n = syscall(SYS_read, fd, buf, sizeof buf - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strstr(buf, key);
	if (!p)
		return 0;
	unsigned long long m = strtoull(p + strlen(key), NULL, 16);
	return (m >> (SIGURG - 1)) & 1;
}

static __thread int urg_gating; /* this thread holds urg_gate */
__thread int urg_hold;   /* this thread holds a lock of the shim's */
static _Atomic int64_t urg_gate_at; /* when urg_gate was last taken */
_Atomic unsigned urg_sent; /* SIGURGs sent to this process */

/* urg_restart says whether a wait interrupted by a signal may go on
 * because the signal was a SIGURG of ours (sent since urg_sent was seen)
 * whose handler has SA_RESTART: the kernel restarts a TCP read then. */
int urg_restart(unsigned seen)
{
	struct sigaction sa;
	return atomic_load(&urg_sent) != seen && sigaction(SIGURG, NULL, &sa) == 0 && (sa.sa_flags & SA_RESTART);
}

/* urg_claim takes slot i if it still holds fd1. */
static int urg_claim(int i, int fd1)
{
	if (!atomic_compare_exchange_strong(&urg_slot[i], &fd1, 0))
		return 0;
	atomic_fetch_sub(&urg_noted, 1);
	return 1;
}

/* urg_signal sends SIGURG for the mark in slot i (fd1 = fd + 1). self: the
 * caller is an application thread outside the engine. It returns 0, the
 * mark left noted, when application threads are inside the engine: they
 * send it on their way out. */
static int urg_signal(int i, int fd1, int self)
{
	struct f_owner_ex o = { 0 };
	if (syscall(SYS_fcntl, fd1 - 1, F_GETOWN_EX, &o) != 0 || o.pid <= 0) {
		urg_claim(i, fd1); /* nobody to tell */
		return 1;
	}
	pid_t me = getpid(), tid = (pid_t)syscall(SYS_gettid);
	int here = (o.type == F_OWNER_PID && o.pid == me) || (o.type == F_OWNER_PGRP && o.pid == getpgrp()) ||
		   (o.type == F_OWNER_TID && syscall(SYS_tgkill, me, o.pid, 0) == 0);
	sigset_t cur;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	if (self && !sigismember(&cur, SIGURG) &&
	    ((o.type == F_OWNER_PID && o.pid == me) || (o.type == F_OWNER_TID && o.pid == tid))) {
		/* This thread takes it as tgkill returns, in C. */
		if (urg_claim(i, fd1)) {
			atomic_fetch_add(&urg_sent, 1);
			syscall(SYS_tgkill, me, tid, SIGURG);
		}
		return 1;
	}
	if (!here) { /* only other processes */
		if (urg_claim(i, fd1)) {
			if (o.type == F_OWNER_TID)
				syscall(SYS_tkill, o.pid, SIGURG);
			else
				kill(o.type == F_OWNER_PGRP ? -o.pid : o.pid, SIGURG);
		}
		return 1;
	}
	/* A thread of this process, chosen by the kernel or named by the owner,
	 * takes it: keep application threads out of Go until it has. An
	 * engine thread (not self) counts itself in urg_sending first, until
	 * its kill() has returned: whoever waits at the gate meanwhile waits
	 * for that, however long the thread is kept off the CPU, not for a
	 * time (the mark is there to be seen; its signal must come first). */
	int sending = !self;
	atomic_fetch_add(&urg_sending, sending);
	atomic_fetch_add(&urg_gate, 1);
	atomic_store(&urg_gate_at, now_ns());
	int inside = atomic_load(&urg_inside) > 0;
	if (inside || !urg_claim(i, fd1)) {
		atomic_fetch_sub(&urg_sending, sending);
		atomic_fetch_sub(&urg_gate, 1);
		return !inside;
	}
	pid_t pt = o.type == F_OWNER_TID ? o.pid : 0;
	/* One already pending (every thread blocks SIGURG) merges with
	 * this one: nobody takes it soon, nothing to wait for. */
	int wait = !urg_pending(pt);
	int was = urg_gating;
	urg_gating = 1; /* a handler run by this thread may call the engine */
	atomic_fetch_add(&urg_sent, 1);
	if (o.type == F_OWNER_TID)
		syscall(SYS_tgkill, me, o.pid, SIGURG);
	else
		kill(o.type == F_OWNER_PGRP ? -o.pid : o.pid, SIGURG);
	/* Sent: a thread that may take it does so at its next return
	 * from the kernel, which its wait at the gate makes. */
	atomic_fetch_sub(&urg_sending, sending);
	for (int64_t end = now_ns() + URG_WAIT_NS; wait && urg_pending(pt) && now_ns() < end;)
		sched_yield();
	urg_gating = was;
	atomic_fetch_sub(&urg_gate, 1);
	return 1;
}

/* urg_flush signals the noted marks. */
static int urg_flush(int self)
{
	int done = 1;
	for (int i = 0; i < URG_SLOTS && atomic_load(&urg_noted) > 0; i++) {
		int fd1 = atomic_load(&urg_slot[i]);
		if (fd1 && !urg_signal(i, fd1, self))
			done = 0;
	}
	return done;
}

/* shim_urgent is the engine's callback (struct sdp_engine_config). fd >= 0:
 * note a new mark on fd; the result says whether an engine thread must call
 * again with fd = -1 (no application thread is inside to signal it on its
 * way out). fd = -1: signal the noted marks from an engine thread. */
int shim_urgent(int fd)
{
	if (fd < 0)
		return urg_flush(0);
	urg_note(fd);
	return atomic_load(&urg_inside) == 0;
}

/* urg_gated says whether a thread that waits at the gate until end waits
 * on: while an engine thread has a signal to send, whatever the time (it
 * runs a few system calls, never a wait, to send it; URG_SEND_NS only
 * guards against a hang), then until end for it to be taken. */
static int urg_gated(int64_t end)
{
	if (!atomic_load(&urg_gate))
		return 0;
	int64_t now = now_ns();
	if (atomic_load(&urg_sending) > 0) {
		if (now < end + URG_SEND_NS)
			return 1;
		static atomic_int logged;
		if (!atomic_exchange(&logged, 1))
			logmsg(0, "an engine thread took an urgent mark and has not sent its SIGURG in %lld ms; going on",
			       (long long)(URG_SEND_NS / 1000000));
		return 0;
	}
	return now < end;
}

/* urg_wait_gate waits while a signal is on its way; it may be for this
 * thread, which takes it here, in C (sched_yield returns through the
 * kernel's signal delivery). */
static void urg_wait_gate(int64_t end)
{
	while (urg_gated(end)) {
		/* A holder whose thread ran the handler, which left by
		 * siglongjmp, never lets go: it is taken for gone. Such a
		 * holder is an application thread, never one sending. */
		if (!atomic_load(&urg_sending) && now_ns() - atomic_load(&urg_gate_at) > 4 * URG_WAIT_NS) {
			atomic_store(&urg_gate, 0);
			break;
		}
		sched_yield();
	}
}

static inline void urg_enter(void)
{
	atomic_fetch_add(&urg_inside, 1);
	if (!atomic_load(&urg_gate)) {
		urg_gating = 0; /* left over by a handler's siglongjmp, if set */
		return;
	}
	if (urg_gating)
		return;
	int64_t end = now_ns() + 2 * URG_WAIT_NS;
	do {
		atomic_fetch_sub(&urg_inside, 1);
		urg_wait_gate(end);
		atomic_fetch_add(&urg_inside, 1);
	} while (urg_gated(end));
}

/* urg_deliver sends the signals for the noted marks; if another thread is
 * sending one, it returns once that was taken: a mark the caller's call
 * saw has been signalled when the call returns, as on TCP. */
static void urg_deliver(void)
{
	if (atomic_load(&urg_noted) > 0)
		urg_flush(1);
	if (atomic_load(&urg_gate) && !urg_gating)
		urg_wait_gate(now_ns() + 2 * URG_WAIT_NS);
}

/* urg_leave ends an engine call: the marks that came in meanwhile are
 * signalled, unless the thread holds a lock of the shim's (urg_unhold
 * does it then). */
static inline void urg_leave(void)
{
	atomic_fetch_sub(&urg_inside, 1);
	if (!urg_hold)
		urg_deliver();
}

/* urg_unhold ends a stretch in which the thread held a lock of the shim's
 * (an epoll set's): a handler, which may call the shim or leave by
 * siglongjmp, runs only once it is released. */
void urg_unhold(void)
{
	if (--urg_hold == 0)
		urg_deliver();
}

/* The engine's entry points as loaded; eng holds the counting wrappers. */
static __typeof__(eng) eng_real;

#define URG_WRAP(ret, name, params, args)       \
	static ret urg_##name params            \
	{                                       \
		urg_enter();                    \
		ret r_ = eng_real.name args;    \
		urg_leave();                    \
		return r_;                      \
	}
/* attach runs under attach_mu: a handler calling the engine would find it
 * taken, so marks seen while attaching are signalled by the next call. */
static int urg_attach(int fd, int role, const uint8_t *req, int len)
{
	urg_enter();
	int r = eng_real.attach(fd, role, req, len);
	atomic_fetch_sub(&urg_inside, 1);
	return r;
}
URG_WRAP(int64_t, sendv, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
URG_WRAP(int64_t, sendv_flags, (int fd, const struct iovec *iov, int cnt, int flags), (fd, iov, cnt, flags))
URG_WRAP(int64_t, recvv, (int fd, const struct iovec *iov, int cnt, int flags), (fd, iov, cnt, flags))
URG_WRAP(int, poll, (int fd, int want, int *wait, int *tmo, int *efd, uint32_t *edges), (fd, want, wait, tmo, efd, edges))
URG_WRAP(int, shutdown, (int fd, int how), (fd, how))
URG_WRAP(int, close, (int fd), (fd))
URG_WRAP(int, stats, (char *buf, int len), (buf, len))
URG_WRAP(int, dup, (int oldfd, int newfd), (oldfd, newfd))
URG_WRAP(int64_t, query, (int fd, int what), (fd, what))
URG_WRAP(int64_t, take_early, (int fd, char *buf, int len), (fd, buf, len))
URG_WRAP(int, exit, (void), ())
URG_WRAP(int64_t, recv_cancel, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
URG_WRAP(int64_t, send_cancel, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt))
URG_WRAP(int, set_buffers, (int fd, int snd, int rcv), (fd, snd, rcv))
URG_WRAP(int, short_peer, (const uint8_t *addr, int port), (addr, port))
URG_WRAP(int, withdraw, (const int *fds, int n, uint8_t *done), (fds, n, done))
URG_WRAP(int, spin, (const int *fds, int n, int epfd, int64_t *state, uint8_t *done), (fds, n, epfd, state, done))

/* urg_wrap routes the application's engine calls through the wrappers. */
void urg_wrap(void)
{
	static const struct shim_engine urg = {
		.attach = urg_attach,
		.sendv = urg_sendv,
		.sendv_flags = urg_sendv_flags,
		.recvv = urg_recvv,
		.poll = urg_poll,
		.shutdown = urg_shutdown,
		.close = urg_close,
		.stats = urg_stats,
		.dup = urg_dup,
		.query = urg_query,
		.take_early = urg_take_early,
		.exit = urg_exit,
		.recv_cancel = urg_recv_cancel,
		.send_cancel = urg_send_cancel,
		.set_buffers = urg_set_buffers,
		.short_peer = urg_short_peer,
		.withdraw = urg_withdraw,
		.spin = urg_spin,
	};
	eng_layer(&eng_real, &urg);
}
