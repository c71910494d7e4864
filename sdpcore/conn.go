package sdpcore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Role says which end of the TCP connection a Conn is. The accepting side
// (Passive) is the MPA initiator: it sends the MPA Request carrying Hello
// as soon as it accepts. The connecting side (Active) sends nothing until it
// has validated that Request, then answers with the MPA Reply (HelloAck).
type Role uint8

// Roles.
const (
	Active Role = iota
	Passive
)

// Events are poll(2) event bits.
type Events = int16

// Poll event bits used by Conn.Poll.
const (
	EvIn    Events = unix.POLLIN
	EvOut   Events = unix.POLLOUT
	EvErr   Events = unix.POLLERR
	EvHup   Events = unix.POLLHUP
	EvRdHup Events = 0x2000 // POLLRDHUP
)

// ErrWouldBlock says the operation cannot proceed now; Poll tells what to
// wait for.
var ErrWouldBlock = unix.EAGAIN

// FallbackError says the connecting side found no SDP peer on the mapped
// port before any application byte was exchanged: the caller should use
// plain TCP to the application's port instead.
type FallbackError struct {
	Reason, Detail string
	Early          []byte // bytes the application sent before the fallback, to send over TCP
	// Reset: the peer left by a reset, and the read that met it took the
	// kernel's report of it, which the application must still be given.
	Reset bool
}

func (e *FallbackError) Error() string { return "sdp: fall back to TCP: " + e.Reason + ": " + e.Detail }

// Stats counts what one connection carried.
type Stats struct {
	PayloadTx, PayloadRx   uint64 // application bytes
	MsgsTx, MsgsRx         uint64 // SDP messages
	CreditUpdates          uint64 // messages sent only to return credits
	CreditStalls           uint64 // sends that found no credit (or, rdma/nic, no ring space)
	UserCopiesTx           uint64 // payload bytes copied in user space, per direction
	UserCopiesRx           uint64
	BCopySends             uint64 // Data messages (credit, transport) or ring writes (rdma, nic) sent
	CoalescedSends         uint64 // sends merged into data already queued (held, appended, corked)
	RingAcks               uint64 // rdma/nic: Immediate Data sent only to return ring space
	DirectPlacedRx         uint64 // ring or ZCopy bytes the transport read from the socket (or shared memory's ring) straight into place
	ZCopyReadSends         uint64 // SrcAvail offers made (Read ZCopy)
	ZCopyCancels           uint64 // of them, cancelled because the sink did not read
	ZCopyTx, ZCopyRx       uint64 // payload bytes moved by RDMA Read or Write instead of buffer copy
	ZCopySinkAvails        uint64 // SinkAvail offers made (Write ZCopy)
	ZCopyWriteSends        uint64 // RDMA Writes made into the peer's SinkAvail
	ZCopyWriteRx           uint64 // of ZCopyRx, bytes the peer RDMA-Wrote into our SinkAvail
	FlowControl            string // the mode agreed with the peer
	Buffering, Progress    string // the local modes
	Tx                     TxStats
	TxRecords              uint64 // runs of FPDUs handed to the kernel as one record
	Rx                     RxStats
	Markers, CRC, RxMarker bool
	Up                     bool // Hello/HelloAck done: the Reply sent (connecting side) or received (accepting side)
	// SharedMemory: the messages go through shared memory (samehost.go);
	// SameHostNote says why not where it was asked for and not used.
	SharedMemory bool
	SameHostNote string
	// Spins counts the waits that polled shared memory first (Spin),
	// SpinHits those that found the peer's bytes so.
	Spins, SpinHits uint64
	// BellsRung and BellsHeard count the doorbell octets this side wrote
	// and read over shared memory.
	BellsRung, BellsHeard uint64
}

// Conn is one SDP connection over one kernel TCP socket.
type Conn struct {
	mu   sync.Mutex
	cfg  Config
	role Role
	st   state // handshake, established, closing sequence, failed (state.go); changed only by to
	err  error // why the connection failed (unix.Errno for the application)
	told bool  // Failure has returned err
	fb   *FallbackError

	// Flags: facts that can hold in any state, so not steps of the life
	// cycle (st).
	//
	// patient: the SDP port was proved to be the listener of the
	// application port's owner (SetPatient): its Request comes when that
	// server accepts, however late, as a TCP reply would; no deadline.
	patient bool
	// peerFirst: the peer's first FPDU has arrived.
	peerFirst bool
	// eof: the kernel stream ended (the peer's FIN, or a write that met the
	// peer gone), with or without the peer's DisConn, in any phase: a
	// handshake then falls back, a failure keeps it (EPIPE, not ECONNRESET).
	eof bool
	// rdShut: the application shut down reading (SHUT_RD); local only,
	// nothing goes on the wire.
	rdShut bool
	// closed: the application closed its descriptor; the connection may
	// still be finishing its closing sequence (Linger), or have failed.
	closed bool
	// reset: a write met the peer's reset while the peer's last bytes may
	// still be unread; reads go on until they meet it too (flush).
	reset error
	// bg: a background goroutine is driving the connection (Background,
	// which clears it when it stops).
	bg bool
	// async: the progress goroutine runs (ProgressAsync; cleared when it ends).
	async bool
	// inBackground: Background, which only finishes the kernel's part of
	// sends the application made, is driving the connection.
	inBackground bool

	tr       Transport
	deadline time.Time // end of the handshake wait
	sent     SetupMsg  // passive: the setup request we sent (its framing)

	// Credits (SDP buffer-copy flow control). Our messages carry MSeq 1, 2…;
	// the peer grants peerBufs buffers as of our message peerAck.
	mseq, peerAck uint32
	peerBufs      int
	peerBufSize   int
	preRingSent   int    // rdma and nic modes: payload sent in Data messages before the peer's ring was named (preRingRoom)
	recvSeq       uint32 // MSeq of the last message received
	bufs          int    // receive buffers we offer in all
	bufSize       int
	posted        int // of them, free now
	advBufs       int // Bufs and MSeqAck carried by our last message
	advAck        uint32
	freed         int // buffers the application emptied since then

	// Receive: payload pieces in arrival order.
	rq      []piece
	rqHead  int
	rqBytes int
	// The receive sink (sink.go): payload queued through it in this
	// receive, copies copyOut found already made, and the check the
	// transport asks.
	sunk, sunkOut int
	sinkSeen      uint64 // the transport's SinkPlaced when last looked at
	rxLazy        bool   // progress for a wait that only reads: readable is enough (sink.go)
	prompted      bool   // the peer was asked to read as things come (promptPeer)
	rxBuf         int    // the buffer of the application's last receive (leaveRest)
	sinkBuf       []byte
	sinkPlaceFn   func(head []byte, n int) []byte
	rxOut         uint64  // bytes the application has read (or skipped), all time
	urg           urgent  // urgent data (MSG_OOB)
	inMsg         bool    // inside a multi-segment message
	inData        bool    // … which is a Data message
	msgLeft       int     // bytes of it still to come
	msgHeld       bool    // it holds a buffer until its payload is read
	msgFrees      bool    // a message without data (zero copy's, DisConn): its buffer counts as freed once in
	rxSeg         Segment // the segment progress is handling (Transport.NextSegment fills it)

	parts [][]byte
	hdr   [BSDHLen]byte
	early []byte // taken before the connection was up; sent first once it is
	// earlyStore is early's backing array while early holds bytes, from a
	// pool of the process (earlyqueue.go).
	earlyStore *earlyBuf
	earlyOOB   int // early[earlyOOB-1] is an urgent byte (0: none)
	// creditStalled: a send waited for credits since our last update; a
	// peer that has sent DisConn may have none left to return them.
	creditStalled bool
	// sndLimit, rcvLimit: the application's SO_SNDBUF and SO_RCVBUF as the
	// kernel counts them (bufsize.go); 0: not set.
	sndLimit, rcvLimit int
	efd                int    // eventfd for waiting threads, -1 until one asks (Waiter)
	sleepers           int    // threads asleep on efd that said so (Sleep, Woke)
	sleepFds           []int  // eventfds of threads asleep on their own (PollWaitOwn), one each
	uncounted          bool   // some thread waits on efd without saying so: always ring it
	lookAlone          bool   // progress runs for the look of the only such waiter (PollLook)
	changes            uint64 // counts events that may make a waiter ready
	woken              uint64 // changes when waiters were last woken (wake)
	edges              uint32 // counts arrivals the application may see (edge-triggered epoll)
	wasWritable        bool
	stats              Stats
	lastWait           time.Time

	fc FlowControl // agreed with the peer in Hello/HelloAck

	// rdma and nic: the peer's ring, which we fill (sender side) …
	peerRing     STag
	peerRingSize uint32
	ringWr       uint32   // bytes written into it, all time
	ringAcked    uint32   // of them, bytes the peer has read
	held         []byte   // data coalesced while the peer's ring is full
	ringParts    [][]byte // the parts of one ring write (writeRingSplit)
	heldOff      int
	// … and ours, which the peer fills.
	ring       []byte
	ringSTag   STag
	ringIn     uint32 // bytes announced by Immediate Data, all time
	ringFreed  uint32 // of them, bytes the application has read
	ringAdv    uint32 // ringFreed as last told to the peer
	directSeen uint64 // the transport's DirectPlaced when last looked at

	lastDataLen int   // transport: BSDH Len of the last Data message queued
	txFlags     uint8 // BSDH OOB flags for the Data messages being queued
	lastUrgent  bool  // the last Data message queued carries OOB flags: nothing joins it
	corked      bool
	corkUntil   time.Time
	sbuf        []byte // separate buffering: SDP's private send buffer

	zsrc       *zsrc     // our outstanding SrcAvail
	zsink      *zsink    // the peer's outstanding SrcAvail
	pendingSM  bool      // a SendSM answering SrcAvailCancel waits for a credit
	rdCollect  []byte    // bytes our Read placed, for the call that asked (collectRead)
	zcopyPause time.Time // no SrcAvail before then (zcopyBackoff)
	// Write ZCopy (zcopy_write.go): negotiated (ownWZ: our Hello said
	// so), our SinkAvail, the peer's, whether one of the peer's is out,
	// the MSeq of our last message with data and of our last RdmaWrCompl,
	// and a SinkCancelAck waiting for a credit.
	ownWZ, peerWZ bool
	// ownSH: our Hello asked for shared memory (CapSameHost).
	ownSH bool
	// spins, spinHits: Stats.Spins and SpinHits, counted without the lock.
	spins, spinHits atomic.Uint64
	// spinFor: how long the next Spin polls, in nanoseconds (0: the
	// caller's whole bound); spin.go.
	spinFor          atomic.Int64
	zw               *zwsink
	zws              *zwsrc
	sinkOut          bool
	dataSeq          uint32
	wrComplSeq       uint32
	pendingCancelAck bool
	comps            []Completion
}

type piece struct {
	data []byte
	seg  Segment
	last bool // last piece of a Data message that holds a buffer
	ring bool // data lies in our receive ring: reading it frees ring space
	sunk bool // data lies in the receive's sink, where copyOut puts it (sink.go)
	// store holds data in separate buffering: SDP's own receive buffer,
	// from the early queue's pools, given back once the piece is read.
	store *earlyBuf
}

// release gives back what the piece holds: the transport's segment, or
// its store.
func (p *piece) release() {
	p.seg.Release()
	putEarly(p.store)
	*p = piece{}
}

// newActive starts the connecting side over tr, whose connection to the
// SDP port is established (NewActive); cfg is sanitized.
func newActive(tr Transport, cfg Config, now time.Time) *Conn {
	c := &Conn{cfg: cfg, role: Active, st: stAwaitRequest, tr: tr, efd: -1}
	c.deadline = orNow(now).Add(cfg.ConnectTimeout)
	c.initModes()
	return c
}

// SetPatient makes a connecting side wait for the MPA Request without
// SDP_CONNECT_TIMEOUT: the caller has proved (the kernel's word, on one host)
// that an SDP listener of the application port's owner holds the SDP port,
// so silence there is a server that has not accepted yet, not a foreign one.
func (c *Conn) SetPatient() {
	c.mu.Lock()
	c.patient = true
	c.unlock()
}

// initModes records the local modes and starts the progress goroutine.
func (c *Conn) initModes() {
	c.sndLimit, c.rcvLimit = kernelBufSize(c.cfg.SndBuf), kernelBufSize(c.cfg.RcvBuf)
	c.stats.FlowControl = c.fc.String()
	c.stats.Buffering, c.stats.Progress = c.cfg.Buffering.String(), c.cfg.Progress.String()
	if c.cfg.Progress == ProgressAsync {
		c.async = true
		go c.progressLoop()
	}
}

// newPassive starts the accepting side over tr, whose setup request sent
// carries Hello h (NewPassive); cfg is sanitized.
func newPassive(tr Transport, cfg Config, h Hello, sent SetupMsg) (*Conn, error) {
	c := &Conn{cfg: cfg, role: Passive, st: stAwaitReply, tr: tr, efd: -1}
	// The Request went out when the shim accepted the connection, a moment
	// before the engine took it over.
	c.deadline = time.Now().Add(cfg.HandshakeTimeout)
	c.sent = SetupMsg{Markers: sent.Markers, CRC: sent.CRC} // the framing only: the Hello is h
	c.bufs, c.bufSize = int(h.Bufs), int(h.LocalRcvSz)
	c.posted, c.advBufs = c.bufs, c.bufs
	c.fc = h.FlowControl // what we asked for, until the HelloAck says
	c.ownWZ = h.Cap&CapWriteZCopy != 0 && cfg.ZCopyThreshold > 0
	c.ownSH = h.Cap&CapSameHost != 0 && cfg.SameHost
	if c.fc.ring() {
		if err := c.makeRing(); err != nil {
			return nil, err
		}
	}
	c.initModes()
	return c, nil
}

// Fd returns the socket descriptor the connection uses.
func (c *Conn) Fd() int { return c.tr.Fd() }

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.unlock()
	s := c.stats
	s.Tx, s.Rx, s.TxRecords = c.tr.WireStats()
	if sh, ok := c.tr.(sameHoster); ok {
		s.SharedMemory = sh.SameHost()
		s.BellsRung, s.BellsHeard = sh.Bells()
	}
	s.Spins, s.SpinHits = c.spins.Load(), c.spinHits.Load()
	return s
}

// Established reports whether Hello and HelloAck have been exchanged.
func (c *Conn) Established() bool {
	c.mu.Lock()
	defer c.unlock()
	return c.phase() == stEstablished
}

func (c *Conn) fail(err error) {
	if c.phase() == stFailed {
		return
	}
	if err == unix.ECONNRESET && (c.eof || c.peerDis()) {
		// Reset after the peer's end of stream: as TCP in CLOSE_WAIT,
		// the application sees EPIPE on writing, end of stream on reading.
		err = unix.EPIPE
	}
	var en unix.Errno
	var pe *ProtoError
	if !errors.As(err, &en) && !errors.As(err, &pe) {
		// Not the kernel's: what the peer sent broke the transport (a
		// CRC, a marker, a ring it scribbled on), which told the peer
		// as it could; the application sees EIO and the log the reason.
		err = &ProtoError{Err: err}
	}
	c.toFailed()
	c.err = err
	c.changes++
	c.edges++
}

// failProto ends the connection after a protocol fault of the peer: a
// Terminate is queued (best effort) and the application sees EIO.
func (c *Conn) failProto(err error) {
	switch {
	case c.tr.Terminate(err):
		_ = c.tr.Flush()
	case c.phase() == stEstablished && c.credits() >= 1:
		// An SDP-level fault (a message out of place): AbortConn tells
		// the peer, which sees ECONNRESET.
		c.sendControl(MIDAbortConn)
		_ = c.tr.Flush()
	}
	c.fail(&ProtoError{Err: err})
}

// ProtoError is a connection failure caused by what the peer sent.
type ProtoError struct{ Err error }

func (e *ProtoError) Error() string { return e.Err.Error() }
func (e *ProtoError) Unwrap() error { return e.Err }

// HandshakeTimeoutError ends an accepted connection whose peer sent no MPA
// Reply within Wait; the application sees ETIMEDOUT, as for a TCP
// connection that stopped answering.
type HandshakeTimeoutError struct{ Wait time.Duration }

func (e *HandshakeTimeoutError) Error() string {
	return "sdp: no MPA Reply from the peer within " + e.Wait.String()
}
func (e *HandshakeTimeoutError) Unwrap() error { return unix.ETIMEDOUT }

// Errno maps a connection failure to the errno the application sees.
func Errno(err error) unix.Errno {
	if en, ok := err.(unix.Errno); ok { // the usual case, without errors.As's reflection
		return en
	}
	var en unix.Errno
	var pe *ProtoError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &pe):
		return unix.EIO
	case errors.As(err, &en):
		return en
	}
	return unix.EIO
}

// Err returns why the connection failed, or nil.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.unlock()
	return c.err
}

// Failure returns why the connection failed the first time it is asked
// after the failure, and nil before and afterwards: the application sees
// only an errno, the engine logs the reason once.
func (c *Conn) Failure() error {
	c.mu.Lock()
	defer c.unlock()
	if c.err == nil || c.told {
		return nil
	}
	c.told = true
	return c.err
}

// credits returns the messages the peer can still take. Only the credit
// mode counts them; the others never wait for credits.
func (c *Conn) credits() int {
	if c.fc != FlowCredit {
		return 1 << 30
	}
	return c.peerBufs - int(c.mseq-c.peerAck)
}

// progress moves the connection as far as it can without blocking: it
// writes queued bytes, reads and handles what has arrived, and drives the
// MPA/Hello exchange.
func (c *Conn) progress(now time.Time) { c.progressFor(now, false, true) }

// progressFor is progress for a caller that says whether the kernel has
// reported nothing on the socket since the last read found it empty
// (quiet: a caller that waits for the socket to be readable next when
// nothing is ready, an event loop's look before its wait, a receive that
// takes what else is here after a short read): then a read that would
// only find the socket empty again is skipped, and over shared memory the
// ring is read without draining the doorbell socket (FillQuiet). flush
// false leaves what it queued to the caller's flush (a send's first call,
// whose data joins the MPA Reply in one segment).
func (c *Conn) progressFor(now time.Time, quiet, flush bool) {
	if c.phase() == stFailed || c.fb != nil {
		return
	}
	seen, reads := c.changes, 0
	defer func() {
		if c.changes != seen {
			c.wake()
		}
	}()
	if c.flush(); c.phase() == stFailed {
		return // a full socket is no reason not to read: the peer may be blocked on us
	}
	for c.phase() != stFailed && c.fb == nil {
		if c.inBackground && c.phase() == stEstablished && !c.bgWork() {
			// Background's work is done (the application's own calls may
			// have done it since the send that scheduled it): what came is
			// the application's to read, from the ring in one copy, not
			// into receive chunks ahead of it.
			break
		}
		switch c.phase() {
		case stAwaitRequest:
			if c.onRequest(now) {
				continue
			}
		case stAwaitReply:
			if c.onReply() {
				continue
			}
		default:
			if c.sinkBuf != nil && c.leaveRest() {
				// A receive stops in front of a Send its sink cannot take,
				// even one the chunk holds whole: the next receive's can.
				break
			}
			err := c.tr.NextSegment(&c.rxSeg)
			if err == nil {
				c.onSegment(&c.rxSeg)
				c.rxSeg = Segment{} // onSegment released it or took it over
				continue
			}
			if err != ErrIncomplete {
				c.failProto(err)
				return
			}
		}
		if c.phase() == stFailed || c.fb != nil {
			return
		}
		if c.rqBytes >= c.rxMax() {
			break // a reader that falls behind leaves the rest to TCP's window
		}
		if c.leaveRest() {
			break // the next receive's sink takes the rest from the ring (sink.go)
		}
		// After a read that emptied the socket the next one would only say
		// EAGAIN; a quiet caller need not even make the first (FillQuiet).
		if c.tr.Drained() && reads > 0 {
			c.tr.Rest()
			break
		}
		reads++
		if !c.fill(quiet) {
			break
		}
	}
	// Only after reading all there is: a late look is not a late peer.
	if c.phase() == stAwaitRequest && c.fb == nil && !c.patient && !orNow(now).Before(c.deadline) {
		c.fallback(&FallbackError{Reason: "timeout", Detail: "no MPA Request within " + c.cfg.ConnectTimeout.String()})
		return
	}
	if c.phase() == stAwaitReply && !orNow(now).Before(c.deadline) {
		c.fail(&HandshakeTimeoutError{Wait: c.cfg.HandshakeTimeout})
		return
	}
	// Credits that arrived may be what early data, a pending update or
	// DisConn needed.
	if c.fc != FlowRDMA || !c.inBackground || c.wrShut() {
		// rdma: only the application's calls send held data, until it
		// has said its last word (shutdown or close).
		c.drainHeld()
	}
	c.drainEarly(now)
	c.sendPendingSM(now)
	c.maybeReturnCredits()
	c.queueDisConn()
	if flush {
		_ = c.flush()
	}
}

// rxLimit bounds the received payload held for the application: beyond
// it the socket is left unread, so TCP's window stops the sender.
const rxLimit = 1 << 20

// fill reads from the socket (quiet: FillQuiet); false when nothing more
// can be read now.
func (c *Conn) fill(quiet bool) bool {
	var err error
	if quiet {
		err = c.tr.FillQuiet()
	} else {
		err = c.tr.Fill()
	}
	c.changes++ // new bytes, end of stream or an error: all can make a waiter ready
	switch {
	case err == nil:
		return true
	case err == unix.EAGAIN:
		c.changes--
		return false
	case err == ErrPeerClosed && c.reset != nil:
		// The write that met the reset took the kernel's report of it;
		// the reader now meets the end of what came before it.
		c.fail(c.reset)
		return false
	case err == ErrPeerClosed:
		c.onEOF()
		return false
	case err == unix.ECONNRESET && c.phase() == stAwaitRequest:
		// The accepting side sends its MPA Request when its application
		// accepts: before it, nobody has taken the connection. A reset
		// now is its SDP listener closing with the connection queued (a
		// listener closed, or kept by a program that does not load
		// libsdp after exec): P over TCP answers as the kernel would.
		c.fallback(&FallbackError{Reason: "refused", Detail: "the SDP port reset the connection before any MPA Request"})
		return false
	case err == unix.ECONNRESET && c.phase() == stAwaitReply:
		// Before its Reply the peer has sent no byte of the application's:
		// a reset now is a client that closed before the handshake, with
		// our Request unread (the kernel resets such a close).
		c.peerLeft("reset")
		c.fb.Reset = true
		return false
	case err == unix.ECONNRESET && c.role == Active && !c.peerFirst && c.stats.PayloadTx == 0:
		// Our Reply met an accepting side that had closed before its first
		// FPDU, so before any byte of its application: end of stream, as
		// TCP shows a server that accepted and closed. Had we sent it
		// bytes, its close with them unread is a reset over TCP too.
		c.eof = true
		c.edges++
		return false
	default:
		c.fail(err)
		return false
	}
}

// peerLeft ends an accepted connection whose peer left before its Reply
// (end of stream, a reset, an MPA Reject): no byte of the application's came,
// so the engine lets go of the socket and the application goes on with the
// plain TCP socket it is, with the kernel's own answers to its reads (end of
// stream) and writes (accepted, then a reset), as over TCP.
func (c *Conn) peerLeft(how string) {
	c.stats.Up = false // nothing went over SDP: no connection in the counts
	c.fallback(&FallbackError{Reason: "peer-closed", Detail: "the peer left before the handshake (" + how + ")"})
}

func (c *Conn) fallback(fb *FallbackError) {
	fb.Early, c.early, c.earlyOOB = c.early, nil, 0
	c.fb = fb
	c.changes++
}

// onEOF handles the end of the kernel stream. Without DisConn it still
// reads as end of stream, as TCP shows a peer that exited; a stream cut
// inside a message is a fault.
func (c *Conn) onEOF() {
	c.eof = true
	c.edges++
	switch {
	case c.phase() == stAwaitRequest:
		c.fallback(&FallbackError{Reason: "foreign", Detail: "the SDP port closed without an MPA Request"})
	case c.phase() == stAwaitReply:
		c.peerLeft("end of stream")
	case c.role == Active && !c.peerFirst && c.stats.PayloadTx == 0 && c.tr.Buffered() == 0:
		// The accepting side closed before its first FPDU, so before any
		// byte of its application, and has had nothing of ours: its
		// program never used the connection. The socket goes back to the
		// application, which then sees what TCP shows: end of stream, and
		// a write that the kernel takes before the peer's reset.
		c.peerLeft("end of stream before its first FPDU")
	case c.tr.Buffered() > 0 || c.inMsg:
		c.fail(&ProtoError{Err: errors.New("sdp: stream ended inside a message")})
	}
}

func (c *Conn) flush() error {
	if c.reset != nil {
		return c.reset
	}
	pending := c.tr.TxPending()
	if pending == 0 {
		return nil
	}
	err := c.tr.Flush()
	if c.tr.TxPending() < pending {
		c.changes++ // room in the transmit backlog
	}
	if err == unix.ECONNRESET && !c.eof && !c.peerDis() && c.phase() != stFailed {
		// The peer reset the connection (an abortive close). What it sent
		// before is still in the kernel and readable, as over TCP: the
		// reading side takes it and then meets the reset itself; writes
		// fail from now on.
		c.reset = err
		c.changes++
		c.edges++
		return err
	}
	if err != nil && err != unix.EAGAIN {
		// The peer is gone: as on TCP, writing gives EPIPE and reading
		// ends the stream, unless it was reset (and had not ended its
		// stream first), which both report: the write may be the
		// engine's own, a credit update, that met the reset before the
		// program's read did.
		c.fail(err)
		if err == unix.EPIPE || err == unix.ECONNRESET {
			c.eof = true
		}
	}
	return err
}

// FdFloor is the lowest descriptor number the package uses for descriptors
// of its own (eventfds), to keep them away from the application's.
var FdFloor = 0

// OwnFd, when set, is told of every descriptor the package opens (true) and
// is about to close (false), so that the host can keep the application from
// closing them.
var OwnFd func(fd int, own bool)

// raiseFd moves a descriptor of the package's own to FdFloor or above
// (when set), closing the original; it stays where it is if that fails.
func raiseFd(fd int) int {
	if FdFloor <= 0 || fd >= FdFloor {
		return fd
	}
	hi, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, FdFloor)
	if err != nil {
		return fd
	}
	unix.Close(fd)
	return hi
}

func ownFd(fd int, own bool) {
	if OwnFd != nil {
		OwnFd(fd, own)
	}
}

// closeOwn closes a descriptor of the package's own.
func closeOwn(fd int) {
	ownFd(fd, false)
	unix.Close(fd)
}

// onRequest handles the MPA Request on the connecting side. It returns true
// when it consumed it.
func (c *Conn) onRequest(now time.Time) bool {
	req, n, err := c.tr.PeerSetup(false)
	if err == ErrIncomplete {
		return false
	}
	if err != nil {
		c.fallback(&FallbackError{Reason: "foreign", Detail: err.Error()})
		return false
	}
	h, err := ParseHello(req.PrivateData)
	if err != nil {
		c.fallback(&FallbackError{Reason: "version", Detail: err.Error()})
		return false
	}
	c.tr.ConsumeSetup(n)
	c.bufs, c.bufSize = c.cfg.RecvBufs, c.cfg.BufSize
	c.posted, c.advBufs = c.bufs, c.bufs
	c.peerBufs, c.peerBufSize = int(h.Bufs), int(h.LocalRcvSz)
	// Both ends use the mode both asked for; any difference, or a peer
	// that asks for nothing, means credit, which every SDP peer has.
	c.fc = FlowCredit
	if h.FlowControl == c.cfg.FlowControl {
		c.fc = h.FlowControl
	}
	c.stats.FlowControl = c.fc.String()
	ha := &HelloAck{Bufs: uint16(c.bufs), IPVersion: h.IPVersion, ActRcvSz: uint32(c.bufSize), FlowControl: c.fc}
	if c.peerWZ = h.Cap&CapWriteZCopy != 0 && c.cfg.ZCopyThreshold > 0; c.peerWZ {
		ha.Cap = CapWriteZCopy
	}
	if c.fc.ring() {
		if err := c.makeRing(); err != nil {
			c.fc, ha.FlowControl = FlowCredit, FlowCredit
			c.stats.FlowControl = c.fc.String()
		} else {
			ha.RingSTag, ha.RingSize = uint32(c.ringSTag), uint32(len(c.ring))
		}
	}
	markers, crc := c.cfg.Markers, c.cfg.CRC
	if h.Cap&CapSameHost != 0 {
		c.offerSameHost(ha)
		if ha.Cap&CapSameHost != 0 {
			// The peer is on this host (an offer says so): no network
			// for markers and CRC to guard against, over TCP or shared
			// memory, so this side asks for neither (docs/PROTOCOL.md).
			markers, crc = false, false
		}
	}
	ack := AppendHelloAck(nil, ha)
	c.tr.SendSetupReply(SetupMsg{Markers: markers, CRC: crc, PrivateData: ack})
	c.stats.Markers, c.stats.RxMarker, c.stats.CRC = req.Markers, markers, req.CRC || crc
	c.tr.StartMessages(req.Markers, markers, req.CRC || crc, c.cfg.MarkerSpacing, 0)
	// We send at once, not after the accepting side's first FPDU (RFC
	// 5044 §7.1.2's rule for hardware that must switch to framing first;
	// the accepting engine reads its stream in order, Reply then FPDUs):
	// the accepting program may make no call for a while, and TCP would
	// have delivered our bytes to its kernel meanwhile. The Hello's
	// buffers are all a Data message needs; the rdma and nic modes send
	// Data messages too until the ChRcvBuf names the ring (ringSend).
	c.establish()
	c.stats.Up = true
	// No flush here: progress, which called us, flushes when it has
	// queued what the application wrote meanwhile (drainEarly), or a
	// send does with its data (sendFlagsLocked): the Reply and the first Data
	// message leave in one segment.
	return true
}

// onReply handles the MPA Reply on the accepting side, and sends the first
// FPDU at once where the connecting side waits for it: the ring's ChRcvBuf
// (rdma, nic), or the answer to an offer of shared memory.
func (c *Conn) onReply() bool {
	rep, n, err := c.tr.PeerSetup(true)
	if err == ErrIncomplete {
		return false
	}
	if err != nil {
		c.fail(&ProtoError{Err: err})
		return false
	}
	if rep.Reject {
		// The connecting side gave up (its timeout) and went to TCP: nothing
		// of the application's came this way, so this one just ends.
		c.tr.ConsumeSetup(n)
		c.peerLeft("MPA Reject")
		return false
	}
	h, err := ParseHelloAck(rep.PrivateData)
	if err != nil {
		c.fail(&ProtoError{Err: err})
		return false
	}
	if h.FlowControl != c.fc && h.FlowControl != FlowCredit {
		c.fail(&ProtoError{Err: fmt.Errorf("sdp: HelloAck chose %v flow control; we asked for %v", h.FlowControl, c.fc)})
		return false
	}
	c.tr.ConsumeSetup(n)
	if c.fc.ring() && !h.FlowControl.ring() {
		c.dropRing()
	}
	c.fc = h.FlowControl
	c.stats.FlowControl = c.fc.String()
	if c.fc.ring() {
		c.peerRing, c.peerRingSize = STag(h.RingSTag), h.RingSize
	}
	req := c.sent
	c.peerBufs, c.peerBufSize = int(h.Bufs), int(h.ActRcvSz)
	c.peerWZ = c.ownWZ && h.Cap&CapWriteZCopy != 0
	if c.ownSH {
		c.joinSameHost(&h)
	}
	crc := req.CRC || rep.CRC
	c.stats.Markers, c.stats.RxMarker, c.stats.CRC = rep.Markers, req.Markers, crc
	c.tr.StartMessages(rep.Markers, req.Markers, crc, c.cfg.MarkerSpacing, 0)
	c.establish()
	c.stats.Up = true
	switch {
	case c.fc.ring():
		c.announceRing() // the first FPDU: where the peer writes to us
	case h.Cap&CapSameHost != 0:
		// The connecting side holds its messages until our first octet
		// says where they go (the doorbell's or an FPDU's): an empty
		// Data message, a credit update, if the region is not taken.
		c.sendControl(MIDData)
	}
	// Otherwise nothing is owed: the Hello's buffers are the connecting
	// side's credits, and our first message (data, a credit update or
	// DisConn) goes when there is one, not as a segment of its own that
	// wakes the peer for nothing.
	return true
}

// sendControl queues a message without payload (credit update, DisConn,
// AbortConn). It uses one credit.
func (c *Conn) sendControl(mid MID) {
	c.mseq++
	c.advertise()
	EncodeBSDH(c.hdr[:], BSDHFields{MID: mid, Bufs: uint16(c.posted), Len: BSDHLen, MSeq: c.mseq, MSeqAck: c.recvSeq})
	c.tr.PostSend(c.hdr[:])
	c.stats.MsgsTx++
	c.lastDataLen = 0 // only a Data message may grow (appendData)
	if mid == MIDData {
		c.lastDataLen = BSDHLen
		c.stats.CreditUpdates++
	}
}

// onSegment handles one received DDP segment.
func (c *Conn) onSegment(seg *Segment) {
	switch {
	case seg.Kind == SegTagged:
		seg.Release()
		c.failProto(c.tr.RejectSegment(*seg))
		return
	case seg.Kind == SegTerminate: // Terminate from the peer
		seg.Release()
		c.fail(unix.ECONNRESET)
		return
	case seg.Kind == SegImmediate && c.fc.ring():
		if c.role == Active && c.peerRingSize == 0 {
			seg.Release()
			c.failProto(errors.New("sdp: ring data before the ring announcement"))
			return
		}
		err := c.onRingData(seg.Payload)
		seg.Release()
		if err != nil {
			c.failProto(err)
		}
		return
	case seg.Kind != SegSend:
		seg.Release()
		c.failProto(c.tr.RejectSegment(*seg))
		return
	}
	c.peerFirst = true
	payload := seg.Payload
	if seg.Offset == 0 {
		if len(payload) < BSDHLen {
			seg.Release()
			c.failProto(errors.New("sdp: message shorter than its BSDH"))
			return
		}
		if err := c.onHeader(BSDH(payload), len(payload)); err != nil {
			seg.Release()
			c.failProto(err)
			return
		}
		payload = payload[BSDHLen:]
		c.msgLeft -= BSDHLen
	}
	c.msgLeft -= len(payload)
	if c.msgLeft < 0 || (seg.Last && c.msgLeft != 0) {
		seg.Release()
		c.failProto(fmt.Errorf("sdp: message length does not match its BSDH (%d bytes off)", -c.msgLeft))
		return
	}
	if seg.Last {
		c.inMsg = false
	}
	if !c.inData || len(payload) == 0 || c.closed {
		if c.inData && len(payload) > 0 && c.closed {
			c.abort() // data for a descriptor the application closed: as TCP, reset
		}
		if seg.Last && c.msgHeld {
			c.msgHeld = false
			c.posted++
			if c.msgFrees {
				c.freed++
			}
		}
		if c.inData && seg.Last {
			c.onOOBPayload(nil, true)
		}
		seg.Release()
		return
	}
	last, segLast := seg.Last && c.msgHeld, seg.Last
	if last {
		c.msgHeld = false
	}
	var store *earlyBuf
	if c.cfg.Buffering == BufSeparate {
		// SDP's own receive buffer between iWARP's and the application,
		// from a pool: a copy made per message allocated 64 KiB each.
		store = getEarly(len(payload))
		store.b = append(store.b[:0], payload...)
		payload = store.b
		seg.Release()
		*seg = Segment{}
		c.stats.UserCopiesRx += uint64(len(payload))
	}
	c.stats.PayloadRx += uint64(len(payload))
	c.edges++
	sunk := seg.Sunk
	if !sunk && c.sinking(len(payload)) {
		payload, sunk = c.sinkCopy(payload), true
		seg.Release()
		*seg = Segment{}
	}
	if sunk {
		c.sunk += len(payload)
	}
	c.rq = append(c.rq, piece{data: payload, seg: *seg, last: last, sunk: sunk, store: store})
	c.rqBytes += len(payload)
	c.onOOBPayload(payload, segLast) // seg is emptied above in separate buffering
}

// onHeader checks a message's BSDH and takes the credits it carries.
func (c *Conn) onHeader(h BSDH, first int) error {
	if c.inMsg {
		return errors.New("sdp: new message before the last one ended")
	}
	if h.MSeq() != c.recvSeq+1 {
		return fmt.Errorf("sdp: MSeq %d, want %d", h.MSeq(), c.recvSeq+1)
	}
	if int32(h.MSeqAck()-c.peerAck) < 0 || int32(c.mseq-h.MSeqAck()) < 0 {
		return fmt.Errorf("sdp: MSeqAck %d outside [%d, %d]", h.MSeqAck(), c.peerAck, c.mseq)
	}
	if int(h.Len()) < BSDHLen || int(h.Len()) > c.bufSize {
		return fmt.Errorf("sdp: %v of %d bytes does not fit our %d-byte receive buffers", h.MID(), h.Len(), c.bufSize)
	}
	credit := c.fc == FlowCredit
	// A credit update (a Data message without payload) is handled as it
	// arrives and holds no buffer, so a peer may send one with no credits
	// left: that is how two ends that each spent their last credit on
	// messages that crossed tell each other about the buffers their
	// applications have emptied since (maybeReturnCredits).
	if h.MID() == MIDData && int(h.Len()) == BSDHLen {
		credit = false
	}
	if credit && c.posted == 0 {
		return errors.New("sdp: peer sent beyond the credits we granted")
	}
	c.recvSeq = h.MSeq()
	c.peerAck, c.peerBufs = h.MSeqAck(), int(h.Bufs())
	c.stats.MsgsRx++
	c.inMsg, c.msgLeft, c.msgHeld = true, int(h.Len()), credit
	// Zero copy's messages ask for their buffers back, as data does: a
	// sink that reads a large SrcAvail in small pieces sends one
	// RdmaRdCompl per piece, and a source that only waits must return
	// those buffers or the sink runs out of credits half-way. A credit
	// update (an empty Data message) never does (two peers would answer
	// each other's updates for ever), nor DisConn, after which the peer
	// sends nothing that needs them.
	c.msgFrees = h.MID().zeroCopy()
	if credit {
		c.posted--
	}
	c.inData = false
	if c.fc.ring() && c.peerRingSize == 0 && h.MID() != MIDChRcvBuf {
		return fmt.Errorf("sdp: %v before the ring announcement", h.MID())
	}
	switch h.MID() {
	case MIDSrcAvail:
		return c.onSrcAvail(h)
	case MIDRdmaRdCompl:
		return c.onRdmaRdCompl(h)
	case MIDSendSM:
		return c.onSendSM()
	case MIDSrcAvailCncl:
		return c.onSrcAvailCancel()
	case MIDSinkAvail:
		return c.onSinkAvail(h)
	case MIDRdmaWrCompl:
		return c.onRdmaWrCompl(h)
	case MIDSinkAvailCncl:
		return c.onSinkAvailCancel(h)
	case MIDSinkCancelAck:
		return c.onSinkCancelAck()
	case MIDChRcvBuf:
		if !c.fc.ring() || c.peerRingSize != 0 {
			return errors.New("sdp: unexpected ChRcvBuf message")
		}
		return c.onRingAnnounce(h)
	case MIDData:
		c.inData = true
	case MIDDisConn:
		c.gotDisConn()
		c.edges++
	case MIDAbortConn:
		c.fail(unix.ECONNRESET)
	default:
		return fmt.Errorf("sdp: unexpected %v message", h.MID())
	}
	return c.onOOBFlags(h)
}

func (c *Conn) releaseQueue() {
	for i := c.rqHead; i < len(c.rq); i++ {
		c.rq[i].release()
	}
	c.rq, c.rqHead, c.rqBytes = c.rq[:0], 0, 0
}

// maybeReturnCredits sends a credit update when the application has
// emptied buffers the peer does not know about yet: half of them, or any
// once the peer is down to its last credit. Buffers emptied by reading
// data count, and ones that other messages without data used (msgFrees),
// never ones a credit update used: otherwise two peers would answer each
// other's updates for ever. An update needs no credit: both ends may have
// spent their last ones on messages that crossed, each offering the one
// buffer the other's message then took, and only an update can tell the
// other end that its application has emptied buffers since
// (TestCreditsCrossedAtZero; TestModesMatrix under load met it).
func (c *Conn) maybeReturnCredits() {
	if c.fc.ring() {
		c.maybeAckRing()
		return
	}
	if c.fc != FlowCredit || c.phase() != stEstablished {
		return
	}
	peerView := c.advBufs - int(c.recvSeq-c.advAck)
	// A peer that has ended its stream may have spent its last credit on
	// DisConn: while a send of ours waits for credits, it may need our
	// acknowledgement of its messages (which an update carries, freed
	// buffers or not) to return the buffers it has emptied.
	rescue := c.creditStalled && c.peerDis() && peerView < 2
	if c.freed == 0 && !rescue {
		return
	}
	if c.peerDis() && c.zsrc == nil && !c.creditStalled {
		// The peer has ended its stream: it needs credits only to
		// answer an offer of ours, or to return buffers we wait for
		// (it half-closed and reads what we send). An update otherwise
		// could reach a socket it has closed, which the kernel answers
		// with a reset that cuts what we still have to read.
		return
	}
	if c.credits() < 1 && c.freed == 0 {
		// An update needs no credit (onHeader), but without buffers the
		// application emptied it tells nothing new: a sender that stalls
		// again and again must not send one each time.
		return
	}
	if c.freed >= max(1, c.bufs/2) || peerView < 2 {
		c.sendControl(MIDData)
		c.creditStalled = false
	}
}

// advertise records that the message being sent carries our free buffers.
func (c *Conn) advertise() {
	c.advBufs, c.advAck, c.freed = c.posted, c.recvSeq, 0
}

// queueDisConn sends DisConn once nothing else waits before it.
func (c *Conn) queueDisConn() {
	if c.wrShut() && !c.disSent() && c.phase() == stEstablished && len(c.early) == 0 && c.heldLen() == 0 && c.zsrc == nil && c.credits() >= 1 {
		c.sendControl(MIDDisConn)
		c.sentDisConn()
	}
}

// String describes the connection's state for logs and failing tests.
func (c *Conn) String() string {
	c.mu.Lock()
	defer c.unlock()
	return fmt.Sprintf("fc=%v held=%d zsrc=%v zsink=%v ", c.fc, c.heldLen(), c.zsrc != nil, c.zsink != nil) + fmt.Sprintf("st=%v credits=%d peerBufs=%d mseq=%d peerAck=%d recvSeq=%d posted=%d advBufs=%d advAck=%d rq=%d txPending=%d rxBuffered=%d inMsg=%v eof=%v err=%v",
		c.st, c.credits(), c.peerBufs, c.mseq, c.peerAck, c.recvSeq, c.posted, c.advBufs, c.advAck, c.rqBytes,
		c.tr.TxPending(), c.tr.Buffered(), c.inMsg, c.eof, c.err)
}
