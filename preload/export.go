// Command preload is the libsdp engine: a Go c-shared library that the
// preload shim (shim.c, shim/) loads on first SDP use. This file holds every
// function the shim calls; they take and return plain integers and never
// hand Go pointers to C. A panic inside becomes a connection error.
package main

/*
#include <stdint.h>
#include <poll.h>
#include <stdlib.h>
#include "abi.h"

static int call_snapshot(int (*f)(char *, int), char *buf, int len) { return f ? f(buf, len) : 0; }
static void call_own_fd(void (*f)(int, int), int fd, int own) { if (f) f(fd, own); }
static void call_settling(void (*f)(int), int delta) { if (f) f(delta); }
*/
import "C"

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"libsdp/sdpcore"
)

func main() {}

//export sdp_engine_init
func sdp_engine_init(cfg *C.struct_sdp_engine_config) (rc C.int) {
	defer guard(-1, &rc)
	if cfg == nil || cfg.abi_version != C.SDP_ABI_VERSION {
		return -C.int(unix.EINVAL)
	}
	snapshotFn = cfg.snapshot
	setUrgent(cfg.urgent)
	if f := cfg.settling; f != nil {
		settling = func(delta int) { C.call_settling(f, C.int(delta)) }
	}
	if ownFn := cfg.own_fd; ownFn != nil {
		sdpcore.OwnFd = func(fd int, own bool) {
			o := C.int(0)
			if own {
				o = 1
			}
			C.call_own_fd(ownFn, C.int(fd), o)
		}
	}
	initEngine(engineConfig{
		logFd:      int(cfg.log_fd),
		logLevel:   int(cfg.log_level),
		prog:       C.GoString(&cfg.prog[0]),
		markers:    cfg.markers != 0,
		crc:        cfg.crc != 0,
		spacing:    int(cfg.marker_spacing),
		bufSize:    int(cfg.buf_size),
		recvBufs:   int(cfg.recv_bufs),
		connectMs:  int(cfg.connect_timeout_ms),
		unaligned:  cfg.fpdu_align == 0, // off
		alignLocal: cfg.fpdu_align == 1, // on; 2: auto
	})
	return 0
}

//export sdp_attach
func sdp_attach(fd C.int, role C.int, req *C.uint8_t, reqLen C.int) (rc C.int) {
	defer guard(int(fd), &rc)
	var request []byte
	if req != nil && reqLen > 0 {
		request = C.GoBytes(unsafe.Pointer(req), reqLen)
	}
	return C.int(attach(int(fd), sdpcore.Role(role&0xff), role&C.SDP_ROLE_PATIENT != 0, request))
}

//export sdp_sendv
func sdp_sendv(fd C.int, iov *C.struct_iovec, cnt C.int) (rc C.int64_t) {
	defer guard64(int(fd), &rc)
	c := lookup(int(fd), callSend)
	if c == nil {
		return -C.int64_t(goneErr(int(fd)))
	}
	// The zero time: the connection reads the clock only if a timer needs it (sdpcore/clock.go).
	n, bg, err := c.SendThenBackground(iovecs(iov, cnt), 0, time.Time{})
	if bg { // bytes the kernel could not take: flush them without waiting for a call
		background(c)
	}
	return C.int64_t(result(int(fd), c, n, err))
}

// sendFlags and recvFlags map the ABI's flag bits (abi.h) to sdpcore's.
var sendFlags = [...]struct {
	abi  C.int
	core sdpcore.SendFlags
}{{C.SDP_SEND_MORE, sdpcore.SendMore}, {C.SDP_SEND_WAIT, sdpcore.SendWait}, {C.SDP_SEND_OOB, sdpcore.SendOOB}}

var recvFlags = [...]struct {
	abi  C.int
	core sdpcore.RecvFlags
}{{C.SDP_RECV_PEEK, sdpcore.RecvPeek}, {C.SDP_RECV_WAIT, sdpcore.RecvWait}, {C.SDP_RECV_FILL, sdpcore.RecvFill}, {C.SDP_RECV_BLOCK, sdpcore.RecvBlock}, {C.SDP_RECV_WOKE, sdpcore.RecvWoke}}

//export sdp_sendv_flags
func sdp_sendv_flags(fd C.int, iov *C.struct_iovec, cnt C.int, flags C.int) (rc C.int64_t) {
	defer guard64(int(fd), &rc)
	c := lookup(int(fd), callSend)
	if c == nil {
		return -C.int64_t(goneErr(int(fd)))
	}
	if cnt == 0 && flags == 0 { // TCP_CORK cleared
		c.Uncork(time.Now())
		return 0
	}
	var f sdpcore.SendFlags
	for _, m := range sendFlags {
		if flags&m.abi != 0 {
			f |= m.core
		}
	}
	n, bg, err := c.SendThenBackground(iovecs(iov, cnt), f, time.Time{})
	if bg { // queued or corked bytes: flush them without waiting for a call
		background(c)
	}
	return C.int64_t(result(int(fd), c, n, err))
}

//export sdp_recvv
func sdp_recvv(fd C.int, iov *C.struct_iovec, cnt C.int, flags C.int) (rc C.int64_t) {
	defer guard64(int(fd), &rc)
	c := lookup(int(fd), callRecv)
	if c == nil {
		return -C.int64_t(goneErr(int(fd)))
	}
	if flags&C.SDP_RECV_WOKE != 0 {
		c.WokeOwn(int(flags>>C.SDP_RECV_OWN_SHIFT) - 1)
	}
	if flags&C.SDP_RECV_OOB != 0 {
		n, err := c.RecvOOB(firstIovec(iov, cnt), flags&C.SDP_RECV_PEEK != 0, time.Now())
		return C.int64_t(result(int(fd), c, n, err))
	}
	var f sdpcore.RecvFlags
	for _, m := range recvFlags {
		if flags&m.abi != 0 {
			f |= m.core
		}
	}
	bufs := iovecs(iov, cnt)
	n, err := c.Recv(bufs, f, time.Time{})
	if err == sdpcore.ErrWouldBlock && flags&C.SDP_RECV_SPIN != 0 && c.Spin(coreCfg.PollSpin) {
		// The peer's answer came while this blocking receive polled the
		// ring, as its wait's first look would have: read it now.
		n, err = c.Recv(bufs, f, time.Time{})
	}
	return C.int64_t(result(int(fd), c, n, err))
}

//export sdp_recv_cancel
func sdp_recv_cancel(fd C.int, iov *C.struct_iovec, cnt C.int) (rc C.int64_t) {
	defer guard64(int(fd), &rc)
	c, b := cancelled(fd, iov, cnt)
	if c == nil {
		return 0
	}
	return C.int64_t(c.CancelRecv(b))
}

//export sdp_send_cancel
func sdp_send_cancel(fd C.int, iov *C.struct_iovec, cnt C.int) (rc C.int64_t) {
	defer guard64(int(fd), &rc)
	c, b := cancelled(fd, iov, cnt)
	if c == nil {
		return 0
	}
	n := c.CancelSend(b)
	if c.NeedsBackground() { // the rest of the offer, without waiting for a call
		background(c)
	}
	return C.int64_t(n)
}

//export sdp_poll
func sdp_poll(fd C.int, want C.int, wait *C.int, timeoutMs *C.int, efd *C.int, edges *C.uint32_t) (rc C.int) {
	defer guard(int(fd), &rc)
	own := -1
	if want&C.SDP_POLL_OWN != 0 {
		own = int(*efd)
	}
	*wait, *timeoutMs, *efd, *edges = 0, -1, -1, 0
	sleep, woke, block := want&C.SDP_POLL_SLEEP != 0, want&C.SDP_POLL_WOKE != 0, want&C.SDP_POLL_BLOCK != 0
	quiet, alone, level := want&C.SDP_POLL_QUIET != 0, want&C.SDP_POLL_ALONE != 0, want&C.SDP_POLL_LEVEL != 0
	recv, spin, spun := want&C.SDP_POLL_RECV != 0, want&C.SDP_POLL_SPIN != 0, want&C.SDP_POLL_SPUN != 0
	want &^= C.SDP_POLL_SLEEP | C.SDP_POLL_WOKE | C.SDP_POLL_BLOCK | C.SDP_POLL_OWN | C.SDP_POLL_QUIET | C.SDP_POLL_ALONE | C.SDP_POLL_LEVEL | C.SDP_POLL_RECV | C.SDP_POLL_SPIN | C.SDP_POLL_SPUN
	// POLLRDNORM and POLLWRNORM are POLLIN's and POLLOUT's other names on
	// a TCP socket: the kernel reports them together.
	if norm := want & (C.POLLRDNORM | C.POLLWRNORM); norm != 0 {
		if norm&C.POLLRDNORM != 0 {
			want |= unix.POLLIN
		}
		if norm&C.POLLWRNORM != 0 {
			want |= unix.POLLOUT
		}
		defer func() {
			if rc > 0 && rc&unix.POLLIN != 0 {
				rc |= C.int(norm & C.POLLRDNORM)
			}
			if rc > 0 && rc&unix.POLLOUT != 0 {
				rc |= C.int(norm & C.POLLWRNORM)
			}
		}()
	}
	if !woke {
		enginePolls.Add(1)
	}
	c := lookup(int(fd), callPoll)
	if c == nil {
		if e := goneErr(int(fd)); e != unix.EBADF {
			// Ended by an internal error: readable and writable at once,
			// so that the application's next call gets the error.
			return C.int(want) | C.int(unix.POLLERR|unix.POLLHUP)
		}
		return -C.int(unix.EBADF)
	}
	var now time.Time // zero: read only where a timer needs it (sdpcore/clock.go)
	var (
		ready, w sdpcore.Events
		deadline time.Time
		e        uint32
		err      error
		waiter   = -1
	)
	switch {
	case sleep:
		if (block || spin) && !woke && !spun {
			// A blocking call's first look (or a poll's that may):
			// over shared memory, the peer's answer may come sooner
			// than a sleep and a wake-up.
			c.Spin(coreCfg.PollSpin)
		}
		if block && recv {
			ready, w, deadline, e, waiter, err = c.PollWaitRecv(sdpcore.Events(want), now, woke, own)
		} else {
			ready, w, deadline, e, waiter, err = c.PollWaitOwn(sdpcore.Events(want), now, woke, block, own)
		}
	case woke:
		c.WokeOwn(own)
		return 0
	default:
		// The eventfd must exist before the connection is looked at: a
		// change made by another thread after this look must find it to
		// signal.
		waiter = c.Waiter()
		ready, w, deadline, e, err = c.PollLook(sdpcore.Events(want), now, quiet, alone, level)
	}
	*edges = C.uint32_t(e)
	if err != nil {
		return C.int(result(int(fd), c, 0, err))
	}
	*wait = C.int(w)
	// A sleeper gets the eventfd only when it sleeps (PollWait returns -1
	// otherwise). A caller that passes neither flag (epoll) gets it even
	// when something it wants is ready: an edge-triggered registration
	// waits for what it has not been told yet (room to send, while the
	// peer's end of stream stays readable), and the change that brings it
	// may be made by the progress goroutine, whose read of the socket
	// leaves the kernel's edge on it with nothing to report.
	*efd = C.int(waiter)
	if !deadline.IsZero() {
		ms := time.Until(deadline).Milliseconds() + 1
		if ms < 0 {
			ms = 0
		}
		*timeoutMs = C.int(ms)
	}
	return C.int(ready)
}

//export sdp_shutdown
func sdp_shutdown(fd C.int, how C.int) (rc C.int) {
	defer guard(int(fd), &rc)
	c := lookup(int(fd), callOther)
	if c == nil {
		return -C.int(goneErr(int(fd)))
	}
	err := c.Shutdown(how == unix.SHUT_RD || how == unix.SHUT_RDWR, how == unix.SHUT_WR || how == unix.SHUT_RDWR, time.Now())
	if c.NeedsBackground() { // held data and DisConn must not wait for another call
		background(c)
	}
	return C.int(result(int(fd), c, 0, err))
}

//export sdp_threads
func sdp_threads(n C.int) (rc C.int) {
	defer guard(-1, &rc)
	threadsUsing(int(n))
	return 0
}

//export sdp_short_peer
func sdp_short_peer(addr *C.uint8_t, port C.int) (rc C.int) {
	defer guard(-1, &rc)
	peer := peerKey{port: uint16(port)}
	copy(peer.addr[:], unsafe.Slice((*byte)(unsafe.Pointer(addr)), len(peer.addr)))
	return C.int(shortTCP(peer))
}

//export sdp_withdraw
func sdp_withdraw(fds *C.int, n C.int, done *C.uint8_t) (rc C.int) {
	defer guard(-1, &rc)
	if n <= 0 {
		return 0
	}
	fs, ds := unsafe.Slice(fds, int(n)), unsafe.Slice(done, int(n))
	for i, fd := range fs {
		ds[i] = 0
		if c := conns.get(int(fd)); c != nil && c.Withdraw() {
			ds[i] = 1
			rc++
		}
	}
	return rc
}

// The set's state, SDP_SPIN_STATE_WORDS words of the shim's, is a
// sdpcore.SpinState: the two must be the same size (either constant array
// length goes negative and the build fails).
var (
	_ [unsafe.Sizeof(sdpcore.SpinState{}) - C.SDP_SPIN_STATE_WORDS*8]byte
	_ [C.SDP_SPIN_STATE_WORDS*8 - unsafe.Sizeof(sdpcore.SpinState{})]byte
)

//export sdp_spin
func sdp_spin(fds *C.int, n C.int, epfd C.int, state *C.int64_t, done *C.uint8_t) (rc C.int) {
	defer guard(-1, &rc)
	if n <= 0 || coreCfg.PollSpin <= 0 {
		return 0
	}
	st := (*sdpcore.SpinState)(unsafe.Pointer(state))
	if st.Skipping() {
		return 0
	}
	fs, ds := unsafe.Slice(fds, int(n)), unsafe.Slice(done, int(n))
	var room [64]sdpcore.Arrival
	arrived := room[:0]
	for i, fd := range fs {
		if c := conns.get(int(fd)); c != nil && len(arrived) < len(room) {
			if a, ok := c.WatchArrivals(); ok {
				ds[i] = 1
				arrived = append(arrived, a)
			}
		}
	}
	if len(arrived) == 0 {
		// None over shared memory (iWARP, or each with a sleeper or
		// data waiting): the set's next waits do not ask again at once.
		st.NothingToWatch()
		return 0
	}
	kernel := func() bool {
		pfd := [1]unix.PollFd{{Fd: int32(epfd), Events: unix.POLLIN}}
		k, _ := unix.Poll(pfd[:], 0)
		return k > 0
	}
	// A poll during which the thread lost its CPU (another thread was
	// runnable) ends the polls for a while: where threads outnumber the
	// CPUs, polling takes the CPU a peer needs to answer.
	var ru0, ru1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
	setPolls.Add(1)
	got := sdpcore.SpinSet(arrived, coreCfg.PollSpin, st, kernel)
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru1) == nil && ru1.Nivcsw != ru0.Nivcsw {
		st.Preempted()
	}
	if got {
		setPollHits.Add(1)
		return 1
	}
	return 0
}

//export sdp_set_buffers
func sdp_set_buffers(fd, sndbuf, rcvbuf C.int) (rc C.int) {
	defer guard(int(fd), &rc)
	c := lookup(int(fd), callOther)
	if c == nil {
		// Not attached yet: the shim gives the sizes just before
		// sdp_attach, which starts the connection with them.
		mu.Lock()
		bufSizes[int(fd)] = [2]int{int(sndbuf), int(rcvbuf)}
		mu.Unlock()
		return 0
	}
	c.SetBufferSizes(int(sndbuf), int(rcvbuf))
	return 0
}

//export sdp_close
func sdp_close(fd C.int) (rc C.int) {
	defer guard(int(fd), &rc)
	closeConn(int(fd))
	return 0
}

//export sdp_dup
func sdp_dup(oldfd, newfd C.int) (rc C.int) {
	defer guard(int(oldfd), &rc)
	return C.int(alias(int(oldfd), int(newfd)))
}

//export sdp_query
func sdp_query(fd C.int, what C.int) (rc C.int64_t) {
	defer guard64(int(fd), &rc)
	c := lookup(int(fd), callOther)
	if c == nil {
		return -C.int64_t(goneErr(int(fd)))
	}
	switch what {
	case C.SDP_QUERY_INQ:
		return C.int64_t(c.Queued())
	case C.SDP_QUERY_OUTQ:
		return C.int64_t(c.Unsent())
	case C.SDP_QUERY_ATMARK:
		if c.AtMark(time.Now()) {
			return 1
		}
		return 0
	case C.SDP_QUERY_RXSTALL:
		if c.RecvStalled() {
			return 1
		}
		return 0
	case C.SDP_QUERY_ERROR:
		if err := c.Err(); err != nil {
			return C.int64_t(sdpcore.Errno(err))
		}
		return 0
	}
	return -C.int64_t(unix.EINVAL)
}

//export sdp_take_early
func sdp_take_early(fd C.int, buf *C.char, n C.int) (rc C.int64_t) {
	defer guard64(int(fd), &rc)
	if buf == nil || n <= 0 {
		return -C.int64_t(unix.EINVAL)
	}
	return C.int64_t(takeEarly(int(fd), unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))))
}

//export sdp_stats
func sdp_stats(buf *C.char, n C.int) (rc C.int) {
	defer guard(-1, &rc)
	if buf == nil || n <= 0 {
		return 0
	}
	s := statsLine()
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	k := copy(dst[:len(dst)-1], s)
	dst[k] = 0
	return C.int(k)
}

// sdp_engine_exit is called by the interposer when the process exits: it
// removes the process's sdpstat file, so that a listing never shows a
// process that has ended.
//
//export sdp_engine_exit
func sdp_engine_exit() (rc C.int) {
	defer guard(-1, &rc)
	flushAtExit(exitFlushMax)
	stopStatsPublisher()
	return 0
}

var snapshotFn *[0]byte

// shimSnapshot returns the shim's line-per-socket view of the process's
// sockets (see struct sdp_engine_config in abi.h).
func shimSnapshot() string {
	if snapshotFn == nil {
		return ""
	}
	buf := (*C.char)(C.malloc(1 << 20))
	defer C.free(unsafe.Pointer(buf))
	n := C.call_snapshot(snapshotFn, buf, 1<<20)
	return C.GoStringN(buf, n)
}

// iovecs views the caller's iovec array as Go slices of C memory.
func iovecs(iov *C.struct_iovec, cnt C.int) [][]byte {
	if iov == nil || cnt <= 0 {
		return nil
	}
	vs := unsafe.Slice(iov, int(cnt))
	out := make([][]byte, 0, len(vs))
	for _, v := range vs {
		if v.iov_len > 0 && v.iov_base != nil {
			out = append(out, unsafe.Slice((*byte)(v.iov_base), int(v.iov_len)))
		}
	}
	return out
}

// firstIovec returns the first non-empty buffer of iov, or nil: the one that a read of the
// urgent byte fills and that a zero-copy offer, which a cancel call ends, was made of.
func firstIovec(iov *C.struct_iovec, cnt C.int) []byte {
	for _, b := range iovecs(iov, cnt) {
		if len(b) > 0 {
			return b
		}
	}
	return nil
}

// cancelled returns fd's connection and the buffer of the call that sdp_recv_cancel or
// sdp_send_cancel ends (its first non-empty one), or nil, nil when either is missing: the
// call has nothing to cancel.
func cancelled(fd C.int, iov *C.struct_iovec, cnt C.int) (*sdpcore.Conn, []byte) {
	c := lookup(int(fd), callOther)
	if c == nil {
		return nil, nil
	}
	b := firstIovec(iov, cnt)
	if b == nil {
		return nil, nil
	}
	return c, b
}

// guard turns a panic into an error for the call (and the connection).
func guard(fd int, rc *C.int) {
	if r := recover(); r != nil {
		*rc = -C.int(onPanic(fd, r))
	}
}

func guard64(fd int, rc *C.int64_t) {
	if r := recover(); r != nil {
		*rc = -C.int64_t(onPanic(fd, r))
	}
}
