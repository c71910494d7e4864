package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"libsdp/internal/settings"
	"libsdp/sdpcore"
)

// The engine keeps one sdpcore.Conn per application descriptor.

type engineConfig struct {
	logFd, logLevel   int
	prog              string
	markers, crc      bool
	spacing           int
	bufSize, recvBufs int
	connectMs         int
	unaligned         bool
	alignLocal        bool
}

const (
	levelError = iota
	levelWarn
	levelInfo
	levelDebug
)

// Must match SDP_FALLBACK and enum sdp_reason in abi.h.
const (
	fallbackBase  = 100000
	reasonTimeout = 1
	reasonForeign = 2
	reasonVersion = 3
	// reasonPeerClosed: an accepted connection whose peer left before the
	// handshake; the shim keeps it as the plain TCP socket it is.
	reasonPeerClosed = 14
	// fallbackReset (SDP_FALLBACK_RESET) is added to reasonPeerClosed when
	// the peer left by a reset that the engine's read took from the kernel.
	fallbackReset  = 0x400
	errnoEIOResult = int(unix.EIO)
)

var (
	ecfg    engineConfig
	coreCfg sdpcore.Config

	mu        sync.RWMutex
	conns     = newConnTable()
	lingering = map[*sdpcore.Conn]bool{}  // closed by the application, still finishing (lingerMu)
	aliases   = map[*sdpcore.Conn][]int{} // descriptors of connections that were duplicated
	early     = map[int][]byte{}          // bytes a connection that fell back still owes the peer
	// bufSizes holds the application's SO_SNDBUF and SO_RCVBUF given for a
	// descriptor just before it is attached: the connection starts with
	// them, before its first read (sizes given after attach came too late
	// for a progress goroutine that read ahead meanwhile).
	bufSizes = map[int][2]int{}
	// dead holds the descriptors whose connection an internal error ended:
	// until the application closes one, its calls get the error, not EBADF.
	dead = map[int]unix.Errno{}

	// lingerMu guards lingering and settledOrIdle, apart from mu: the
	// goroutine that finishes closed connections (linger.go) takes it, and
	// a writer's lock on mu there made every application thread's next
	// call wait for it and wake it. Order: mu, lingerMu, closedMu.
	lingerMu sync.Mutex

	// Totals of closed connections; live ones are added when reporting.
	closedMu    sync.Mutex
	closedStats totals
)

type totals struct {
	sdpConns                       uint64
	fpdusTx, fpdusRx               uint64
	markersTx, markersRx           uint64
	crcBytesRx, crcErrors          uint64
	payloadTx, payloadRx           uint64
	wireTx, wireRx                 uint64
	creditUpdates, creditStalls    uint64
	userCopiesTx, userCopiesRx     uint64
	bcopySends, coalescedSends     uint64
	ringAcks, directPlacedRx       uint64
	zcopySends, zcopyCancels       uint64
	zcopyTx, zcopyRx               uint64
	zcopySinkAvails, zcopyWrSends  uint64
	zcopyWriteRx, txRecords        uint64
	shmConns, shmBellsRung         uint64
	shmBellsHeard, shmPolls        uint64
	shmPollHits                    uint64
	protoErrors, panics, fallbacks uint64
}

var panics, fallbacks, protoErrors atomic.Uint64

// enginePolls counts the readiness questions the interposer asked
// (sdp_poll): an epoll set of many connections asks only about those that
// moved (shim/epoll.c), which tests check by this count.
var enginePolls atomic.Uint64

// setPolls and setPollHits count the epoll waits that polled shared
// memory before they slept (sdp_spin), and those whose poll found a peer's
// bytes.
var setPolls, setPollHits atomic.Uint64

func initEngine(c engineConfig) {
	ecfg = c
	coreCfg = sdpcore.DefaultConfig()
	coreCfg.Markers, coreCfg.CRC = c.markers, c.crc
	if c.spacing > 0 {
		coreCfg.MarkerSpacing = c.spacing
	}
	if c.bufSize > 0 {
		coreCfg.BufSize = c.bufSize
	}
	if c.recvBufs > 0 {
		coreCfg.RecvBufs = c.recvBufs
	}
	if c.connectMs > 0 {
		coreCfg.ConnectTimeout = time.Duration(c.connectMs) * time.Millisecond
	}
	// Any timer starts the Go runtime's poller (an epoll and an eventfd).
	// Start it now, while the shim watches which descriptors appear, so
	// that it can keep the application's close() away from them. A timer
	// that never fires does it without the sleep's trip through the
	// scheduler (30-150 us of a fresh process's first connection).
	time.AfterFunc(time.Hour, func() {}).Stop()
	coreCfg.Unaligned = c.unaligned
	coreCfg.AlignLocal = c.alignLocal
	// The modes are the engine's alone (the shim only puts the flow
	// control it asks for into Hello, and reads SDP_FLOW_CONTROL itself).
	read := coreCfg.FromEnv(os.Getenv, func(err error) { logf(levelError, "%v", err) })
	logf(levelDebug, "settings (engine): %s", settings.Line(read)) // tests/TestSettingsAgree reads it
	coreCfg.Sanitize()
	sdpcore.FdFloor = highFd()
	// A P idle for the engine's goroutines beside those the application's
	// threads keep; without it the runtime's monitor takes Ps from threads
	// in system calls and wakes threads to run them: a third of what a
	// connection cost a server. Ps come with the application's threads
	// (procs.go).
	initProcs()
	sdpcore.OnBadTransition = func(fd int, from, to string) {
		logf(levelError, "internal error on fd %d: state %s cannot move to %s", fd, from, to)
	}
	startStatsPublisher()
	logf(levelDebug, "engine started: markers=%v marker_spacing=%d crc=%v buf_size=%d recv_bufs=%d flow_control=%v buffering=%v progress=%v zcopy_threshold=%d handshake_timeout=%v",
		coreCfg.Markers, coreCfg.MarkerSpacing, coreCfg.CRC, coreCfg.BufSize, coreCfg.RecvBufs, coreCfg.FlowControl, coreCfg.Buffering, coreCfg.Progress,
		coreCfg.ZCopyThreshold, coreCfg.HandshakeTimeout)
}

func logf(level int, format string, args ...any) {
	if level > ecfg.logLevel {
		return
	}
	line := fmt.Sprintf("libsdp[%d]: "+format+"\n", append([]any{os.Getpid()}, args...)...)
	fd := ecfg.logFd
	if fd < 0 {
		fd = 2
	}
	_, _ = unix.Write(fd, []byte(line))
}

// lookup returns fd's connection; kind names the entry point calling
// (faultinject.go).
func lookup(fd int, kind callKind) *sdpcore.Conn {
	injectFault(fd, kind)
	return conns.get(fd)
}

func attach(fd int, role sdpcore.Role, patient bool, request []byte) int {
	cfg := coreCfg
	mu.Lock()
	if b, ok := bufSizes[fd]; ok {
		cfg.SndBuf, cfg.RcvBuf = b[0], b[1]
		delete(bufSizes, fd)
	}
	mu.Unlock()
	var c *sdpcore.Conn
	if role == sdpcore.Passive {
		var err error
		c, err = sdpcore.NewPassive(fd, cfg, request)
		if err != nil {
			logf(levelError, "fd %d: %v", fd, err)
			return -errnoEIOResult
		}
	} else {
		peer := shortPeer(fd, &cfg)
		c = sdpcore.NewActive(fd, cfg, time.Now())
		if patient {
			c.SetPatient()
		}
		watchShort(c, peer)
	}
	mu.Lock()
	old := conns.m[fd]
	conns.set(fd, c)
	delete(dead, fd)
	mu.Unlock()
	if old != nil {
		logf(levelWarn, "fd %d was reused without close; dropping its old connection", fd)
		account(old)
	}
	return 0
}

// detach removes fd's connection and adds its counters to the totals.
func detach(fd int) *sdpcore.Conn {
	mu.Lock()
	defer mu.Unlock()
	c := conns.m[fd]
	conns.del(fd)
	if c != nil {
		accountLocked(c)
	}
	return c
}

// account adds a connection that left the tables to the totals. Moving a
// connection out of conns or lingering and into the totals happens under
// the locks of both in one step (conns: mu; lingering: lingerMu; totals:
// closedMu), so that a statistics line, which takes all three, never misses
// one in between.
func account(c *sdpcore.Conn) {
	c.Retire()
	lingerMu.Lock()
	delete(lingering, c)
	delete(settledOrIdle, c)
	accountLocked(c)
	lingerMu.Unlock()
}

func accountLocked(c *sdpcore.Conn) {
	endShort(c)
	closedMu.Lock()
	addStats(&closedStats, c)
	closedMu.Unlock()
}

func addStats(t *totals, c *sdpcore.Conn) {
	s := c.Stats()
	if s.Up {
		t.sdpConns++
	}
	t.fpdusTx += s.Tx.FPDUs
	t.fpdusRx += s.Rx.FPDUs
	t.markersTx += s.Tx.Markers
	t.markersRx += s.Rx.Markers
	t.crcBytesRx += s.Rx.CRCBytes
	t.crcErrors += s.Rx.CRCErrors
	t.payloadTx += s.PayloadTx
	t.payloadRx += s.PayloadRx
	t.wireTx += s.Tx.Bytes
	t.wireRx += s.Rx.Bytes
	t.creditUpdates += s.CreditUpdates
	t.creditStalls += s.CreditStalls
	t.userCopiesTx += s.UserCopiesTx
	t.userCopiesRx += s.UserCopiesRx
	t.bcopySends += s.BCopySends
	t.coalescedSends += s.CoalescedSends
	t.ringAcks += s.RingAcks
	t.directPlacedRx += s.DirectPlacedRx
	t.zcopySends += s.ZCopyReadSends
	t.zcopyCancels += s.ZCopyCancels
	t.zcopyTx += s.ZCopyTx
	t.zcopyRx += s.ZCopyRx
	t.zcopySinkAvails += s.ZCopySinkAvails
	t.zcopyWrSends += s.ZCopyWriteSends
	t.zcopyWriteRx += s.ZCopyWriteRx
	t.txRecords += s.TxRecords
	if s.Up && s.SharedMemory {
		t.shmConns++
	}
	t.shmBellsRung += s.BellsRung
	t.shmBellsHeard += s.BellsHeard
	t.shmPolls += s.Spins
	t.shmPollHits += s.SpinHits
}

// result turns an sdpcore outcome into the ABI's integer.
func result(fd int, c *sdpcore.Conn, n int, err error) int {
	if err == nil {
		return n
	}
	// A bare errno (EAGAIN on every read to the end, EPIPE, ECONNRESET) is
	// neither a fallback nor a failure to log: no errors.As, whose
	// reflection cost a call two allocations.
	if en, ok := err.(unix.Errno); ok && en != 0 && en != unix.EIO && en != unix.ETIMEDOUT {
		return -int(en)
	}
	var fb *sdpcore.FallbackError
	if errors.As(err, &fb) {
		detach(fd)
		if len(fb.Early) > 0 {
			mu.Lock()
			early[fd] = fb.Early
			fb.Early = nil
			mu.Unlock()
		}
		if fb.Reason != "peer-closed" { // not a fallback: nothing came, nothing went
			fallbacks.Add(1)
		}
		logf(levelInfo, "fd %d: %v", fd, fb)
		switch fb.Reason {
		case "timeout":
			return -(fallbackBase + reasonTimeout)
		case "version":
			return -(fallbackBase + reasonVersion)
		case "peer-closed":
			if fb.Reset {
				return -(fallbackBase + reasonPeerClosed + fallbackReset)
			}
			return -(fallbackBase + reasonPeerClosed)
		}
		return -(fallbackBase + reasonForeign)
	}
	en := sdpcore.Errno(err)
	if en == 0 {
		en = unix.EIO
	}
	if en == unix.EIO || en == unix.ETIMEDOUT { // not EAGAIN's path: Failure takes the lock
		logFailure(fd, c)
	}
	return -int(en)
}

// logFailure names, once, a failure the peer caused (or its silence): the
// application only sees an errno. Called where the application learns it,
// and at close for one that closed after a poll said POLLERR.
func logFailure(fd int, c *sdpcore.Conn) {
	if c == nil {
		return
	}
	// Every failure the application sees as EIO (a protocol fault, or
	// anything without an errno of its own), and a handshake that timed
	// out: the errno alone does not say why.
	var ht *sdpcore.HandshakeTimeoutError
	if fe := c.Failure(); fe != nil && (sdpcore.Errno(fe) == unix.EIO || errors.As(fe, &ht)) {
		logf(levelWarn, "fd %d: connection ended: %v", fd, fe)
	}
}

// takeEarly moves up to len(dst) of the bytes fd's connection took before it
// fell back to TCP into dst.
func takeEarly(fd int, dst []byte) int {
	mu.Lock()
	defer mu.Unlock()
	b := early[fd]
	n := copy(dst, b)
	if n == len(b) {
		delete(early, fd)
	} else {
		early[fd] = b[n:]
	}
	return n
}

// alias makes newfd another descriptor of oldfd's connection.
func alias(oldfd, newfd int) int {
	mu.Lock()
	defer mu.Unlock()
	c := conns.m[oldfd]
	if c == nil {
		return -int(unix.EBADF)
	}
	fds := aliases[c]
	if fds == nil {
		fds = []int{oldfd}
	}
	aliases[c] = append(fds, newfd)
	conns.set(newfd, c)
	return 0
}

// unalias drops fd from its connection's descriptors and reports whether
// another one still holds the connection.
func unaliasLocked(c *sdpcore.Conn, fd int) bool {
	fds := aliases[c]
	for i, f := range fds {
		if f == fd {
			fds = append(fds[:i], fds[i+1:]...)
			break
		}
	}
	if len(fds) == 0 {
		delete(aliases, c)
		return false
	}
	aliases[c] = fds
	if c.Fd() == fd {
		c.SetFd(fds[0])
	}
	return true
}

// exitFlushMax bounds how long an exiting process waits for its connections
// to settle.
const exitFlushMax = 10 * time.Second

// flushAtExit keeps an exiting process (exit(), a return from main) until
// its connections are settled (sdpcore's Settled): every byte its
// application's send() accepted is in the kernel, which then delivers it as
// it delivers a TCP socket's after the process is gone, and the peer has
// acknowledged them, so that no credit update or ring acknowledgement of its
// meets the socket the kernel closes at exit (its reset would drop what the
// kernel has not delivered yet). A connection still open is closed first,
// as the kernel closes it at exit. The wait ends after max: a peer that
// never reads would otherwise hold the process (TCP would keep the bytes in
// the kernel instead). _exit() waits in the shim (settling); fatal signals
// do not wait.
func flushAtExit(max time.Duration) {
	mu.Lock()
	lingerMu.Lock()
	open := make([]int, 0, len(conns.m))
	all := make([]*sdpcore.Conn, 0, len(conns.m)+len(lingering))
	for fd, c := range conns.m {
		open = append(open, fd)
		all = append(all, c)
	}
	for c := range lingering {
		all = append(all, c)
	}
	lingerMu.Unlock()
	mu.Unlock()
	for _, c := range all {
		c.WithdrawSameHost() // what waits for the peer's answer goes to the kernel
	}
	for _, fd := range open {
		closeConn(fd)
	}
	deadline := time.Now().Add(max)
	for {
		lingerMu.Lock()
		var waiting *sdpcore.Conn
		for c := range lingering {
			if !settledOrIdle[c] && !c.Settled() {
				waiting = c
				break
			}
		}
		lingerMu.Unlock()
		if waiting == nil {
			return
		}
		if !time.Now().Before(deadline) {
			logf(levelWarn, "exit: a connection still unsettled after %v (bytes unsent, or the peer still acknowledging); the process exits", max)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func closeConn(fd int) {
	mu.Lock()
	delete(dead, fd)
	delete(bufSizes, fd)
	c := conns.m[fd]
	conns.del(fd)
	shared := c != nil && aliases[c] != nil && unaliasLocked(c, fd)
	if c != nil && !shared {
		lingerMu.Lock()
		lingering[c] = true // counted until account moves it to the totals
		lingerMu.Unlock()
	}
	mu.Unlock()
	if c == nil || shared {
		return
	}
	logFailure(fd, c)
	// What it carried is known now: a connection that lingers must not
	// leave the next connect to its peer without its count.
	endShort(c)
	now := time.Now()
	if lingerZero(fd) {
		// SO_LINGER {1, 0}: AbortConn now, and the application's close
		// resets the TCP connection, as it does for TCP.
		c.Abort(now)
		logConn(fd, c, "aborted")
		account(c)
		return
	}
	if c.Close(now) {
		logConn(fd, c, "closed")
		account(c)
		return
	}
	// The application's descriptor is about to be closed; keep the socket
	// open on a descriptor of our own until the peer has seen everything.
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, sdpcore.FdFloor)
	if err != nil {
		logf(levelWarn, "fd %d: cannot keep the socket for a clean close: %v", fd, err)
		account(c)
		return
	}
	logConn(fd, c, "closing")
	settling(+1)
	var once sync.Once
	settled := func() {
		once.Do(func() {
			lingerMu.Lock()
			settledOrIdle[c] = true
			lingerMu.Unlock()
			settling(-1)
		})
	}
	linger(c.StartLinger(dup, now.Add(coreCfg.Linger), settled), func() {
		settled()
		account(c)
	})
}

// settling tells the shim of closed connections whose sockets must stay
// open a while (struct sdp_engine_config's settling).
var settling = func(int) {}

// settledOrIdle holds the lingering connections that are settled, or whose
// peer stopped acknowledging (sdpcore.SettleIdle): an exit waits no longer
// for them. Guarded by mu.
var settledOrIdle = map[*sdpcore.Conn]bool{}

// lingerZero reports whether the application set SO_LINGER {1, 0} on fd.
func lingerZero(fd int) bool {
	l, err := unix.GetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER)
	return err == nil && l.Onoff != 0 && l.Linger == 0
}

// highFd is where the engine puts descriptors of its own, away from the
// low numbers applications use.
func highFd() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur > 256 {
		return int(rl.Cur / 2)
	}
	return 100
}

func logConn(fd int, c *sdpcore.Conn, what string) {
	if ecfg.logLevel < levelInfo {
		return
	}
	s := c.Stats()
	transport := "sdp/iwarp"
	switch {
	case !s.Up:
		transport = "sdp-unestablished"
	case s.SharedMemory:
		transport = "sdp/shm"
	}
	note := ""
	if s.SameHostNote != "" {
		note = fmt.Sprintf(" shm=%q", s.SameHostNote) // why not, where it was asked for
	}
	logf(levelInfo, "fd %d %s transport=%s payload_tx=%d payload_rx=%d fpdus_tx=%d fpdus_rx=%d markers=%v crc=%v flow_control=%s buffering=%s progress=%s%s",
		fd, what, transport, s.PayloadTx, s.PayloadRx, s.Tx.FPDUs, s.Rx.FPDUs, s.Markers, s.CRC, s.FlowControl, s.Buffering, s.Progress, note)
}

func onPanic(fd int, r any) int {
	panics.Add(1)
	logf(levelError, "internal error on fd %d: %v\n%s", fd, r, strings.TrimSpace(string(debug.Stack())))
	if fd >= 0 {
		mu.Lock()
		if c := conns.m[fd]; c != nil {
			conns.del(fd)
			accountLocked(c)
			dead[fd] = unix.EIO
			c.Abandon() // nothing of ours may touch fd's number again
		}
		mu.Unlock()
	}
	return errnoEIOResult
}

// goneErr is what a call on fd gets when the engine has no connection for
// it: the error that ended it, or EBADF for a descriptor never attached.
func goneErr(fd int) unix.Errno {
	mu.RLock()
	e, ok := dead[fd]
	mu.RUnlock()
	if ok {
		return e
	}
	return unix.EBADF
}

// background runs c's background work (sdpcore.Conn.Background) once
// sdpcore.BgPause has passed, unless the connection is done with it by then.
func background(c *sdpcore.Conn) {
	time.AfterFunc(sdpcore.BgPause, func() { safely(func() { c.Background(coreCfg.Linger) }) })
}

// goSafe runs f on a goroutine of its own (safely).
func goSafe(f func()) { go safely(f) }

// safely runs f; a panic in it is logged and counted like one in a call,
// instead of ending the host program.
func safely(f func()) {
	defer func() {
		if r := recover(); r != nil {
			onPanic(-1, r)
		}
	}()
	f()
}

func statsLine() string {
	mu.RLock()
	lingerMu.Lock()
	closedMu.Lock()
	t := closedStats
	closedMu.Unlock()
	for _, c := range conns.m {
		addStats(&t, c)
	}
	for c := range lingering {
		addStats(&t, c)
	}
	lingerMu.Unlock()
	mu.RUnlock()
	return fmt.Sprintf("sdp_conns=%d fpdus_tx=%d fpdus_rx=%d markers_tx=%d markers_rx=%d crc_bytes_rx=%d crc_errors=%d payload_tx=%d payload_rx=%d wire_tx=%d wire_rx=%d credit_updates=%d credit_stalls=%d user_copies_tx=%d user_copies_rx=%d bcopy_sends=%d coalesced_sends=%d ring_acks=%d direct_placed_rx=%d zcopy_read_sends=%d zcopy_cancels=%d zcopy_tx=%d zcopy_rx=%d zcopy_sink_avails=%d zcopy_write_sends=%d zcopy_write_rx=%d tx_records=%d shm_conns=%d shm_bells_rung=%d shm_bells_heard=%d shm_polls=%d shm_poll_hits=%d shm_set_polls=%d shm_set_poll_hits=%d engine_polls=%d flow_control=%v buffering=%v progress=%v fallbacks=%d panics=%d",
		t.sdpConns, t.fpdusTx, t.fpdusRx, t.markersTx, t.markersRx, t.crcBytesRx, t.crcErrors,
		t.payloadTx, t.payloadRx, t.wireTx, t.wireRx, t.creditUpdates, t.creditStalls,
		t.userCopiesTx, t.userCopiesRx, t.bcopySends, t.coalescedSends, t.ringAcks,
		t.directPlacedRx, t.zcopySends, t.zcopyCancels, t.zcopyTx, t.zcopyRx,
		t.zcopySinkAvails, t.zcopyWrSends, t.zcopyWriteRx, t.txRecords, t.shmConns, t.shmBellsRung, t.shmBellsHeard, t.shmPolls, t.shmPollHits, setPolls.Load(), setPollHits.Load(), enginePolls.Load(),
		coreCfg.FlowControl, coreCfg.Buffering, coreCfg.Progress, fallbacks.Load(), panics.Load())
}
