package sdpcore

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// Send path: the caller's bytes are cut into Data messages no larger than
// the peer's receive buffers; each message is framed straight into the QP's
// transmit buffer (the one user-space copy) and written by the caller's
// thread. A message needs a credit and one credit is always kept back for
// credit updates, so two peers that both only send cannot starve each
// other's updates. When credits or the kernel's buffer run out, Send returns
// what it took; nothing is taken that is not already framed.

// SendFlags select send(2) behaviour.
type SendFlags uint8

// Send flags.
const (
	// SendMore (MSG_MORE): more is coming; the bytes are taken but held
	// until a send without it, or corkMax later, so they go out with it.
	SendMore SendFlags = 1 << iota
)

// corkMax is how long bytes sent with SendMore wait for the rest, as
// Linux's TCP_CORK ceiling.
const corkMax = 200 * time.Millisecond

// Send takes bytes from bufs. It returns how many it took, ErrWouldBlock,
// a *FallbackError, or the connection's error.
//
// Before the connection is up (the MPA exchange and the first FPDU, which
// may wait for the peer application's first call) bytes are taken into a
// bounded early queue, as the kernel would take them into its send buffer:
// a program may connect to its own listener and write before it accepts.
func (c *Conn) Send(bufs [][]byte, now time.Time) (int, error) {
	return c.SendFlags(bufs, 0, now)
}

// Uncork sends what sends with SendMore hold, as clearing TCP_CORK does.
func (c *Conn) Uncork(now time.Time) {
	c.mu.Lock()
	defer c.unlock()
	if !c.corked {
		return
	}
	c.corked = false
	c.drainEarly(now)
	_ = c.flush()
}

// SendFlags is Send with send(2) flags.
func (c *Conn) SendFlags(bufs [][]byte, flags SendFlags, now time.Time) (int, error) {
	c.mu.Lock()
	defer c.unlock()
	return c.sendFlagsLocked(bufs, flags, now)
}

// SendThenBackground is SendFlags followed by NeedsBackground, under one
// hold of the connection's lock: what the preload's send does every time.
func (c *Conn) SendThenBackground(bufs [][]byte, flags SendFlags, now time.Time) (n int, bg bool, err error) {
	c.mu.Lock()
	defer c.unlock()
	n, err = c.sendFlagsLocked(bufs, flags, now)
	return n, c.needsBackgroundLocked(), err
}

func (c *Conn) sendFlagsLocked(bufs [][]byte, flags SendFlags, now time.Time) (int, error) {
	held := c.phase() != stEstablished
	if held {
		// The MPA Reply that progress may queue waits for this send's
		// data, so that both leave in one segment.
		c.progressFor(now, false, false)
		defer func() { _ = c.flush() }()
	}
	if err := c.sendable(); err != nil && err != ErrWouldBlock {
		return 0, err
	}
	total := totalLen(bufs)
	if flags&SendOOB == 0 && total == 0 {
		return 0, nil // as TCP: nothing to take, whatever the state (a wait here never ends)
	}
	if c.zsrc != nil {
		return c.collectZCopy(firstBuf(bufs), now) // ours, or another call's, which comes first
	}
	if c.zwsUsable() {
		if flags&(SendOOB|SendMore) == 0 && !c.corked && len(c.early) == 0 && c.phase() == stEstablished {
			if n, err := c.sendWrite(bufs, now); n > 0 || err != ErrWouldBlock {
				return n, err
			}
			return 0, ErrWouldBlock
		}
		c.zws = nil // it cannot be used: the sink will cancel it on seeing this data
	}
	if flags&SendOOB != 0 {
		return c.sendOOB(bufs, now)
	}
	if flags&SendMore != 0 {
		// Corked bytes share the early queue: taken now, sent first.
		if len(c.early) == 0 {
			c.corkUntil = orNow(now).Add(corkMax)
		} else {
			c.stats.CoalescedSends++
		}
		c.corked = true
		n := c.queueEarly(bufs)
		c.sendFullCorked(now)
		if n == 0 {
			c.corked = len(c.early) > 0
			return 0, ErrWouldBlock
		}
		return n, nil
	}
	if c.corked && len(c.early) > 0 {
		// The end of a corked run: it goes out with what was held.
		c.stats.CoalescedSends++
		c.corked = false
		n := c.queueEarly(bufs)
		c.drainEarly(now)
		_ = c.flush()
		if n == 0 {
			return 0, ErrWouldBlock
		}
		return n, nil
	}
	c.corked = false
	if c.phase() != stEstablished || len(c.early) > 0 {
		c.drainEarly(now)
		_ = c.flush()
		if c.phase() != stEstablished || len(c.early) > 0 {
			if c.phase() == stEstablished && total > queueSmall {
				// Small sends wait in the queue for credits; a large
				// one waits for the queue to empty and then goes from
				// its own buffer (one copy, or zero copy), or a bulk
				// sender would keep refilling the queue and copy twice.
				return 0, ErrWouldBlock
			}
			n := c.queueEarly(bufs)
			if n == 0 {
				return 0, ErrWouldBlock
			}
			return n, nil
		}
	}
	if !held {
		_ = c.flush()
	}
	if c.peerWZ && c.zcopyOK(bufs, flags) {
		// A SinkAvail that just came beats an offer of our own.
		c.progress(now)
		if c.zwsUsable() {
			return c.sendWrite(bufs, now)
		}
	}
	if c.zcopyOK(bufs, flags) && c.startZCopy(bufs[0], now) {
		return 0, ErrWouldBlock // the call waits for the answer and comes back (collectZCopy)
	}
	sent := c.push(bufs, total, now, true)
	if sent < total && c.creditQueue() {
		// Out of credits (the peer's application has not read yet): up to
		// queueSmall bytes wait in the send queue, as bytes wait in TCP's
		// send buffer, and go with later small sends in as few messages as
		// credits allow when they come back (append coalescing, as in Balaji,
		// Bhagvat, Thakur and Panda, "Sockets Direct Protocol for Hybrid
		// Network Stacks: A Case Study with iWARP over 10G Ethernet", §4.2).
		// Small sends are no longer held to a buffer each: 1,000 sends of 10
		// bytes to a reader that reads after them all fit, as over TCP. A
		// large send leaves the rest for when the queue has drained, sent
		// from its own buffer.
		sent += c.queueEarly(gather(nil, bufs, sent, min(total-sent, queueSmall)))
	}
	_ = c.flush()
	if sent == 0 {
		if c.phase() == stFailed {
			return 0, errnoOf(c.err)
		}
		if total == 0 {
			return 0, nil
		}
		return 0, ErrWouldBlock
	}
	return sent, nil
}

// push sends up to total bytes of bufs as the flow-control mode allows and
// returns how many it took. With mayProgress it may read the socket for
// credits.
func (c *Conn) push(bufs [][]byte, total int, now time.Time, mayProgress bool) int {
	if c.ringSend() {
		return c.pushRing(bufs, total)
	}
	sent := 0
	for sent < total && c.phase() == stEstablished && c.tr.TxPending() < c.txBacklog() {
		if c.credits() < 2 {
			if mayProgress {
				c.progress(now)
			}
			if c.credits() < 2 || c.phase() != stEstablished {
				c.stats.CreditStalls++
				c.creditStalled = true
				c.maybeReturnCredits() // the peer may wait for ours to send them
				break
			}
		}
		n := min(total-sent, c.msgRoom())
		if c.fc.ring() { // the peer's ring is not named yet
			if c.preRingRoom() <= 0 && mayProgress {
				c.progress(now)
			}
			if c.ringSend() || c.phase() != stEstablished {
				break // the caller's next push writes into the ring
			}
			if n = min(n, c.preRingRoom()); n <= 0 {
				c.stats.CreditStalls++
				break
			}
			c.preRingSent += n
		}
		c.parts = gather(c.parts[:0], bufs, sent, n)
		c.parts = c.separate(c.parts, n)
		if !c.appendData(n) {
			c.postData(n)
		}
		clear(c.parts)
		sent += n
		if c.tr.TxPending() >= min(c.txBacklog()/2, pushFlush) {
			_ = c.flush()
		}
	}
	return sent
}

// pushFlush is how much a large send frames before it writes: the peer
// starts on the first octets while the rest is framed, instead of waiting
// for the whole send's copy and CRC. One message of the default buffer
// size. Against writing at half the backlog (128 KiB): iperf3's 128 KiB
// writes 10-20% faster between namespaces and 40-50% over loopback's
// iWARP, NetPIPE between namespaces 10-20%; 64 and 100 KiB writes 7%
// slower between namespaces, 100 KiB 25-30% over loopback's iWARP
// (docs/PERFORMANCE.md, "A large send writes as it frames";
// BenchmarkPushFlush). A variable only so that the benchmark can compare.
var pushFlush = 64 << 10

// separate makes the extra copy of separate buffering: into SDP's private
// send buffer, from which iWARP then copies into its marker buffer.
func (c *Conn) separate(parts [][]byte, n int) [][]byte {
	if c.cfg.Buffering != BufSeparate {
		return parts
	}
	c.sbuf = c.sbuf[:0]
	for _, p := range parts {
		c.sbuf = append(c.sbuf, p...)
	}
	c.stats.UserCopiesTx += uint64(n)
	clear(parts)
	return append(parts[:0], c.sbuf)
}

// appendMax bounds a Data message grown by appending: each append frames
// the message again, so only small sends gain from it.
const appendMax = 8 << 10

// appendData, in transport mode, appends the n bytes in c.parts to the last
// Data message when none of it is on the wire yet ("Sockets Direct Protocol
// for Hybrid Network Stacks", §4.2): a send that finds the socket busy joins
// the queued message instead of adding a header and an FPDU of its own.
func (c *Conn) appendData(n int) bool {
	if c.fc != FlowTransport || c.lastDataLen == 0 || c.tr.TxPending() == 0 || c.txFlags != 0 || c.lastUrgent {
		return false
	}
	l := c.lastDataLen + n
	if l > appendMax || l > c.peerBufSize {
		return false
	}
	ok := c.tr.AppendSend(setDataLen, c.parts)
	if !ok {
		return false
	}
	c.lastDataLen = l
	c.dataSeq = c.mseq
	c.stats.CoalescedSends++
	c.stats.PayloadTx += uint64(n)
	c.stats.UserCopiesTx += uint64(n)
	return true
}

// setDataLen sets the BSDH Len of a Data message that AppendSend grew: its
// whole length, header included. A function without captures, so that
// handing it to the transport allocates nothing.
func setDataLen(msg []byte) { binary.BigEndian.PutUint32(msg[4:], uint32(len(msg))) }

// postData queues one Data message carrying the n bytes in c.parts.
func (c *Conn) postData(n int) {
	c.mseq++
	c.advertise()
	EncodeBSDH(c.hdr[:], BSDHFields{MID: MIDData, Flags: c.txFlags, Bufs: uint16(c.posted), Len: uint32(BSDHLen + n), MSeq: c.mseq, MSeqAck: c.recvSeq})
	c.lastUrgent = c.txFlags != 0
	c.parts = append(c.parts, nil)
	copy(c.parts[1:], c.parts)
	c.parts[0] = c.hdr[:]
	c.tr.PostSendParts(c.parts)
	clear(c.parts)
	c.lastDataLen = BSDHLen + n
	c.dataSeq = c.mseq
	c.stats.MsgsTx++
	c.stats.BCopySends++
	c.stats.PayloadTx += uint64(n)
	c.stats.UserCopiesTx += uint64(n)
}

// earlyMax bounds the bytes taken before the connection is up.
const earlyMax = 256 << 10

func (c *Conn) queueEarly(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		room := c.earlyMax() - len(c.early)
		if room <= 0 {
			break
		}
		if len(b) > room {
			b = b[:room]
		}
		c.early = c.earlyRoom(len(b))
		c.early = append(c.early, b...)
		n += len(b)
	}
	// Counted when framed, with PayloadTx: the queue stands in for the
	// kernel's send buffer, which a copy into TCP's would fill too.
	return n
}

// sendFullCorked sends the whole messages that a corked run already fills,
// as TCP sends the full segments of data held by MSG_MORE or TCP_CORK: only
// the tail that fills no message waits for the rest of the run (or corkMax).
// A proxy that writes 16 KiB pieces with MSG_MORE otherwise filled the early
// queue and waited corkMax for every 256 KiB.
func (c *Conn) sendFullCorked(now time.Time) {
	unit := c.peerBufSize - BSDHLen
	if c.phase() != stEstablished || c.wrShutSent() || unit <= 0 || len(c.early) < unit {
		return
	}
	full := len(c.early) / unit * unit
	n := c.push([][]byte{c.early[:full]}, full, now, false)
	c.early = c.early[n:]
	if n > 0 {
		_ = c.flush()
	}
}

// queueSmall: the most of one send that waits in the send queue for credits.
const queueSmall = 16 << 10

// creditQueue says whether a small send would wait in the early queue for
// credits now: in credit flow control, once the peer's buffers are used up,
// while the kernel takes what is framed. The socket reports writable for
// it only while the queue is empty: a sender that queued waits for it to
// drain (a blocking one would otherwise spin on sends the queue refuses).
func (c *Conn) creditQueue() bool {
	return c.fc == FlowCredit && c.phase() == stEstablished && !c.wrShut() && c.tr.TxPending() < c.txBacklog() &&
		c.credits() < 2 && len(c.early) == 0
}

// drainEarly sends early (and corked) bytes as far as the mode allows.
func (c *Conn) drainEarly(now time.Time) {
	if c.corked && orNow(now).Before(c.corkUntil) {
		c.sendFullCorked(now)
		return
	}
	c.corked = false
	if c.earlyOOB > 0 && c.phase() == stEstablished && !c.wrShutSent() {
		n := c.sendOOBNow([][]byte{c.early[:c.earlyOOB]}, c.earlyOOB, now, false)
		c.early, c.earlyOOB = c.early[n:], c.earlyOOB-n
		if c.earlyOOB > 0 {
			return
		}
	}
	if len(c.early) > 0 && c.phase() == stEstablished && !c.wrShutSent() {
		n := c.push([][]byte{c.early}, len(c.early), now, false)
		c.early = c.early[n:]
	}
	if len(c.early) == 0 {
		c.releaseEarly()
	}
}

func (c *Conn) wrShutSent() bool { return c.disSent() }

// NeedsBackground reports, once, that the connection holds work no call of
// the application may come back for: early bytes waiting for the peer, or
// bytes the kernel could not take yet. The caller then runs Background.
func (c *Conn) NeedsBackground() bool {
	c.mu.Lock()
	defer c.unlock()
	return c.needsBackgroundLocked()
}

func (c *Conn) needsBackgroundLocked() bool {
	if c.bg || c.async || c.closed || c.phase() == stFailed || c.fb != nil {
		return false
	}
	if !c.bgWork() {
		return false
	}
	c.bg = true
	return true
}

// BgPause is how long the background work waits for the application's own
// calls before it steps in: a program that keeps writing flushes its own
// queue, one that went away gets it flushed anyway. The caller of
// NeedsBackground runs Background after BgPause (a timer, not a sleeping
// goroutine: most connections need none by then, and a goroutine started
// from the application's thread costs a thread's wake-up).
const BgPause = 5 * time.Millisecond

// Background drives the connection until the work NeedsBackground saw is
// done, the connection ends or is closed, or limit passes.
func (c *Conn) Background(limit time.Duration) {
	until := time.Now().Add(limit)
	for {
		now := time.Now()
		c.mu.Lock()
		if !c.closed {
			c.inBackground = true
			c.progress(now)
			c.inBackground = false
		}
		idle := !c.bgWork()
		if idle || c.closed || c.phase() == stFailed || c.fb != nil || now.After(until) {
			c.bg = false
			c.unlock()
			return
		}
		ev := int16(unix.POLLIN)
		if c.tr.TxPending() > 0 {
			ev |= c.roomEvent()
		}
		fd := c.tr.Fd()
		c.unlock()
		pfd := []unix.PollFd{{Fd: int32(fd), Events: ev}}
		_, _ = unix.Poll(pfd, 50)
		time.Sleep(BgPause)
	}
}

// bgWork reports work that must not wait for the application's next call:
// early or corked bytes, bytes the kernel could not take, in nic mode data
// held for ring space (the asynchronous flush of Balaji, Bhagvat, Panda,
// Thakur and Gropp, "Advanced Flow-control Mechanisms for the Sockets Direct
// Protocol over InfiniBand", §4; rdma mode leaves it to the application's
// next call unless that was a shutdown), and a DisConn that waits for a
// credit: the peer's end of stream must not depend on another call (a program
// that shut down its side after reading the peer's end makes none, and TCP's
// FIN goes anyway).
func (c *Conn) bgWork() bool {
	return len(c.early) > 0 || c.tr.TxPending() > 0 || (c.zsrc != nil && c.zsrc.detached) ||
		(c.heldLen() > 0 && (c.fc == FlowNIC || c.wrShut())) || (c.wrShut() && !c.disSent() && c.phase() == stEstablished)
}

func (c *Conn) sendable() error {
	switch {
	case c.fb != nil:
		return c.fb
	case c.phase() == stFailed:
		return errnoOf(c.err)
	case c.reset != nil:
		return c.reset
	case c.wrShut() || c.eof:
		return unix.EPIPE
	case c.phase() != stEstablished:
		return ErrWouldBlock
	}
	return nil
}

func errnoOf(err error) error { return Errno(err) }

func totalLen(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// gather appends to dst the slices of bufs that cover n bytes from offset off.
func gather(dst [][]byte, bufs [][]byte, off, n int) [][]byte {
	for _, b := range bufs {
		if n == 0 {
			break
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		b = b[off:]
		off = 0
		if len(b) > n {
			b = b[:n]
		}
		dst = append(dst, b)
		n -= len(b)
	}
	return dst
}

// RecvFlags select recv(2) behaviour.
type RecvFlags uint8

// Receive flags.
const (
	RecvPeek RecvFlags = 1 << iota
)

// RecvBlock says the caller blocks when nothing is ready: on ErrWouldBlock
// it waits for the socket to be readable (PollWait with block). A read
// that would only find the socket empty again is then skipped, so a
// blocking receive costs a wait and a read, not a read, a wait and a read.
const RecvBlock RecvFlags = 1 << 4

// RecvWoke says the caller comes back from such a wait: the socket may
// hold what woke it, so the receive reads it whatever its other flags
// (RecvFill) would have skipped.
const RecvWoke RecvFlags = 1 << 5

// Recv copies received bytes into bufs. It returns the count, 0 at end of
// stream, ErrWouldBlock, a *FallbackError, or the connection's error.
func (c *Conn) Recv(bufs [][]byte, flags RecvFlags, now time.Time) (int, error) {
	c.mu.Lock()
	defer c.unlock()
	// Two defers and one return, which the compiler open-codes: with the
	// receive's many returns it had put both on the stack, at every call.
	sunk := false
	defer func() {
		if sunk {
			c.keepSunk()
		}
	}()
	return c.recvLocked(bufs, flags, now, &sunk)
}

// recvLocked is Recv with c.mu held; *sunk tells Recv to keep what a sink
// left queued in the application's buffer (keepSunk) once it returns.
func (c *Conn) recvLocked(bufs [][]byte, flags RecvFlags, now time.Time, sunk *bool) (int, error) {
	if flags&(RecvFill|RecvPeek) == 0 {
		c.rxBuf = len(firstBuf(bufs))
	}
	if c.rqBytes == 0 {
		// Quiet: a blocking call waits for the socket next; a call that
		// takes what else is here after a short read (RecvFill) need not
		// look at the socket again, whose arrivals the next call sees.
		opened := c.sinkOpen(bufs, flags)
		c.progressFor(now, flags&RecvWoke == 0 && (flags&(RecvBlock|RecvPeek) == RecvBlock || flags&RecvFill != 0), true)
		if opened {
			c.sinkClose()
			*sunk = true
		}
	}
	if c.fb != nil {
		return 0, c.fb
	}
	if c.rdCollect != nil {
		return c.collectRead(firstBuf(bufs)) // before anything that came after it
	}
	if c.zw != nil {
		if n, err, ok := c.recvWritePending(firstBuf(bufs)); ok {
			return n, err
		}
	}
	if c.rqBytes > 0 {
		var n int
		if c.urg.mark {
			var ok bool
			if n, ok = c.recvUrgent(bufs, flags); !ok {
				if flags&RecvPeek == 0 {
					c.maybeReturnCredits()
					_ = c.flush()
				}
				if flags&RecvFill != 0 {
					return 0, nil // the call ends at the mark with what it has
				}
				if c.rqBytes > 0 {
					return 0, ErrWouldBlock
				}
				return c.recvEmpty(bufs)
			}
		} else {
			n = c.copyOut(bufs, flags&RecvPeek != 0)
		}
		if flags&RecvPeek == 0 {
			c.stats.UserCopiesRx += uint64(n - c.sunkOut)
			c.maybeReturnCredits()
			c.queueDisConn()
			_ = c.flush()
		}
		return n, nil
	}
	if c.zsink != nil && !c.zsink.reading {
		var b []byte
		for _, x := range bufs {
			if len(x) > 0 {
				b = x
				break
			}
		}
		if n, err := c.recvZCopy(b, flags, now); n > 0 || err != ErrWouldBlock {
			return n, err
		}
	}
	if b := firstBuf(bufs); c.writeZCopyOK(b, flags) && c.postSinkAvail(b) {
		return 0, ErrWouldBlock
	}
	return c.recvEmpty(bufs)
}

// recvEmpty is Recv's answer when nothing is queued.
func (c *Conn) recvEmpty(bufs [][]byte) (int, error) {
	if c.peerDis() || c.rdShut || (c.eof && (c.phase() != stFailed || Errno(c.err) == unix.EPIPE)) {
		return 0, nil
	}
	if c.phase() == stFailed {
		return 0, errnoOf(c.err)
	}
	total := totalLen(bufs)
	if total == 0 {
		return 0, nil
	}
	return 0, ErrWouldBlock
}

// copyOut copies queued payload into bufs, consuming it unless peek.
func (c *Conn) copyOut(bufs [][]byte, peek bool) int {
	n := 0
	i, off := c.rqHead, 0
	c.sunkOut = 0
	for _, b := range bufs {
		for len(b) > 0 && i < len(c.rq) {
			p := &c.rq[i]
			var k int
			if p.sunk && &b[0] == &p.data[off] {
				k = min(len(b), len(p.data)-off) // already there
				c.sunkOut += k
			} else {
				k = copy(b, p.data[off:])
			}
			if p.ring && !peek {
				c.ringFreed += uint32(k)
			}
			b = b[k:]
			n += k
			off += k
			if off == len(p.data) {
				i, off = i+1, 0
			}
		}
	}
	if peek {
		return n
	}
	for j := c.rqHead; j < i; j++ {
		p := &c.rq[j]
		if p.last {
			c.posted++
			c.freed++
		}
		p.release()
	}
	c.rqHead = i
	c.rxOut += uint64(n)
	c.passedMark()
	if off > 0 {
		c.rq[i].data = c.rq[i].data[off:]
	}
	c.rqBytes -= n
	if c.rqHead == len(c.rq) {
		c.rq, c.rqHead = c.rq[:0], 0
	} else if c.rqHead > 64 && c.rqHead*2 > len(c.rq) {
		m := copy(c.rq, c.rq[c.rqHead:])
		clear(c.rq[m:])
		c.rq, c.rqHead = c.rq[:m], 0
	}
	return n
}

// Poll reports which of want are ready for the application, and otherwise
// what to wait for on the kernel socket (wait) and until when (deadline,
// zero for none) before calling Poll again. A *FallbackError means the
// caller should switch to plain TCP.
func (c *Conn) Poll(want Events, now time.Time) (ready, wait Events, deadline time.Time, err error) {
	ready, wait, deadline, _, err = c.PollEdges(want, now)
	return ready, wait, deadline, err
}

// PollEdges is Poll that also returns a counter of arrivals (data, end of
// stream, errors, room to send): edge-triggered waiters report readiness
// again only when it moved.
func (c *Conn) PollEdges(want Events, now time.Time) (ready, wait Events, deadline time.Time, edges uint32, err error) {
	return c.PollLook(want, now, false, false, false)
}

// PollLook is PollEdges for an epoll set's look. quiet: the kernel has
// reported nothing on the socket since the set's last look (an event
// loop's look before it waits): when the last read found the socket (or
// the ring) empty, it does not read again, which would only say so again;
// what did arrive since (data, a doorbell, the peer's end) keeps the
// socket readable, so the wait that follows returns at once and the look
// after it reads. alone: the set is the only waiter that did not say it
// sleeps (Waiter), and it reports what this look finds: the look's
// changes do not ring the eventfd, which would end the set's next wait at
// once only for another look. level: the registration is level-triggered
// (it reports what is ready at every look, not what arrived since the
// last), so a look that only reads may stop at the first data (onlyReads).
func (c *Conn) PollLook(want Events, now time.Time, quiet, alone, level bool) (ready, wait Events, deadline time.Time, edges uint32, err error) {
	c.mu.Lock()
	defer c.unlock()
	c.lookAlone = alone
	c.rxLazy = level && onlyReads(want)
	defer func() { c.lookAlone, c.rxLazy = false, false }()
	return c.pollLocked(want, now, quiet)
}

// onlyReads says whether a wait for want needs only something to read:
// then the rest may stay in a ring for the receive's sink (sink.go). Not a
// wait for room to send or for the peer's end, which messages behind the
// payload may bring.
func onlyReads(want Events) bool { return want&EvIn != 0 && want&(EvOut|EvRdHup) == 0 }

func (c *Conn) pollLocked(want Events, now time.Time, quiet bool) (ready, wait Events, deadline time.Time, edges uint32, err error) {
	c.progressFor(now, quiet, true)
	if c.fb != nil {
		return 0, 0, time.Time{}, c.edges, c.fb
	}
	if c.phase() == stFailed {
		// As TCP after a reset: readable, writable, error, hang-up, and the
		// peer's side shut (POLLRDHUP) for those who ask.
		return (EvIn | EvOut | EvErr | EvHup | EvRdHup) & (want | EvErr | EvHup), 0, time.Time{}, c.edges, nil
	}
	// With nothing queued, a wait that only reads may have left a large
	// Send the ring holds whole for the receive's sink: readable too.
	if (c.rqBytes > 0 && (!c.urg.mark || c.readable())) || (c.rqBytes == 0 && c.rxLazy && c.leaveRest()) || (c.zsink != nil && !c.zsink.reading) || c.rdCollect != nil || c.peerDis() || c.eof || c.rdShut || (c.zw != nil && c.zw.done) {
		ready |= EvIn
	}
	if c.urg.state == urgValid {
		ready |= EvPri
	}
	if c.peerDis() || c.eof || c.rdShut {
		ready |= EvRdHup
	}
	if c.eof || (c.peerDis() && c.disSent()) {
		ready |= EvHup
	}
	if c.phase() == stEstablished && !c.wrShut() && len(c.early) == 0 && (c.zsrc == nil || c.zsrcReady()) && c.credits() >= 2 && c.tr.TxPending() < c.txBacklog() &&
		(!c.fc.ring() || (c.heldLen() < c.txBacklog() && (c.ringSend() || c.preRingRoom() > 0))) {
		ready |= EvOut
	} else if (c.phase() != stEstablished || c.corked || c.creditQueue()) && c.phase() != stFailed && !c.wrShut() && len(c.early) < c.earlyMax() {
		ready |= EvOut // the early queue (a corked run, the send queue) has room
	} else if c.wrShut() || c.eof || c.reset != nil {
		ready |= EvOut // a write will fail at once, as on TCP
	}
	ready &= want | EvHup
	if want&EvIn != 0 && ready&EvIn == 0 {
		wait |= EvIn
	}
	if want&EvOut != 0 && ready&EvOut == 0 {
		if c.tr.TxPending() >= c.txBacklog() {
			wait |= c.roomEvent()
		} else {
			wait |= EvIn // handshake or credits: both arrive as input
		}
	}
	if c.tr.TxPending() > 0 {
		wait |= c.roomEvent() // queued bytes must not wait for the next call
	}
	if (c.phase() == stAwaitRequest && !c.patient) || c.phase() == stAwaitReply {
		deadline = c.deadline
	}
	if d := c.zsrcDeadline(); !d.IsZero() {
		deadline = d // a zero-copy offer's cancel or nudge
	}
	if ready&EvOut != 0 && !c.wasWritable {
		c.edges++ // room to send again
	}
	c.wasWritable = ready&EvOut != 0
	return ready, wait, deadline, c.edges, nil
}

// Shutdown ends one or both directions. Shutting down writing sends DisConn
// after everything queued; the connection still receives.
func (c *Conn) Shutdown(rd, wr bool, now time.Time) error {
	c.mu.Lock()
	defer c.unlock()
	if c.fb != nil {
		return c.fb
	}
	if c.disSent() && c.peerDis() {
		// Both ends' DisConn have passed: TCP's socket is closed by now
		// (both FINs acknowledged) and shutdown reports ENOTCONN.
		return unix.ENOTCONN
	}
	if rd {
		// As TCP after SHUT_RD: a read with nothing queued returns end of
		// stream at once, and the socket polls readable.
		c.rdShut = true
		c.changes++
		c.edges++
		c.wake()
	}
	if wr {
		c.shutWrite()
		c.progress(now)
		c.queueDisConn()
		_ = c.flush()
	}
	return nil
}

// Close is called when the application closes its descriptor. It returns
// true when the connection is finished; otherwise the caller keeps a
// duplicate of the socket and runs Linger on it.
func (c *Conn) Close(now time.Time) bool {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return true // once is enough (tests close again in their cleanup)
	}
	c.closed = true
	c.cancelSink(false, true)
	c.detachRead(nil)
	c.wake() // threads still waiting on it must look again (they will find it closed)
	if c.phase() == stFailed || c.fb != nil || (c.phase() != stEstablished && len(c.early) == 0) {
		c.releaseQueue()
		c.releaseWaiter()
		return true
	}
	if c.rqBytes > 0 {
		c.abort() // unread data: TCP resets the connection
		c.releaseQueue()
		c.releaseWaiter()
		return true
	}
	c.shutWrite()
	c.progress(now)
	c.queueDisConn()
	_ = c.flush()
	done := c.finished()
	if done {
		c.releaseWaiter()
	}
	return done
}

// Abandon ends the connection without a word on the wire, for an engine
// that lost it (an internal error): goroutines still driving it (Background)
// stop at their next look, before the descriptor's number can name another
// socket. A caller that may hold c.mu (a panic inside a method) does not
// wait for it: the marking then happens as soon as the lock is free.
func (c *Conn) Abandon() {
	mark := func() {
		c.closed = true
		c.fail(unix.EIO)
		c.unlock()
	}
	if c.mu.TryLock() {
		mark()
		return
	}
	go func() {
		c.mu.Lock()
		mark()
	}()
}

// Abort is close with SO_LINGER {on, 0}: AbortConn (best effort) instead
// of DisConn, nothing more is sent or kept, and the caller's close of the
// socket then resets the TCP connection.
func (c *Conn) Abort(now time.Time) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.wake()
	if c.phase() != stFailed && c.fb == nil {
		c.abort()
	}
	c.releaseQueue()
	c.releaseWaiter()
}

// Handed reports whether every byte the application's sends accepted is in
// the kernel, which delivers it without this process: what an exiting
// process waits for (preload's exit flush). A DisConn still waiting for a
// credit is not waited for: the kernel's FIN at exit reads as end of stream
// too, and two processes exiting at once would each wait for the other's
// credit. A peer that is gone (end of stream, failure) takes nothing more.
func (c *Conn) Handed() bool {
	c.mu.Lock()
	defer c.unlock()
	return c.handed()
}

func (c *Conn) handed() bool {
	return c.phase() == stFailed || c.fb != nil || c.eof ||
		(c.tr.TxPending() == 0 && len(c.early) == 0 && c.heldLen() == 0)
}

// SettleIdle is how long a closed connection whose bytes are all in the
// kernel waits for an acknowledgement of the peer's before it counts as
// settled anyway: a peer that does not read would otherwise hold an exiting
// process for the whole exit bound, and TCP would not wait for it either.
const SettleIdle = 500 * time.Millisecond

// Settled reports whether a closed connection's socket may be closed by
// the process's end without costing the peer a byte: everything ours is in
// the kernel and the peer will send nothing more (each message of its would
// meet a socket the kernel closed, whose reset drops what it has not yet
// delivered of ours), or the connection is over. What an exiting process
// waits for (preload's exit flush, and the shim's _exit).
func (c *Conn) Settled() bool {
	c.mu.Lock()
	defer c.unlock()
	return c.settled()
}

func (c *Conn) settled() bool {
	if c.phase() == stFailed || c.fb != nil || c.eof {
		return true
	}
	if c.tr.TxPending() > 0 || len(c.early) > 0 || c.heldLen() > 0 {
		return false
	}
	if c.fc == FlowCredit && !c.disSent() {
		return c.mseq == c.peerAck // no DisConn yet: every message acknowledged
	}
	return c.peerQuiet()
}

func (c *Conn) finished() bool {
	return c.phase() == stFailed || c.fb != nil || c.eof ||
		(c.disSent() && c.tr.TxPending() == 0 && c.peerDis() && c.peerQuiet())
}

// peerQuiet says that the peer will send nothing more: it has ended its
// stream, sends nothing once it has seen our DisConn, and has acknowledged
// everything of ours before it, so no credit update or ring acknowledgement
// of its is still to come. Closing the socket before that lets such a
// message meet a closed socket, whose reset costs the peer what it has not
// read yet (a peer that half-closed first and reads our last bytes, as a
// client that shuts down its output and reads the echo). Otherwise the
// close waits for the peer's end of stream (Linger).
func (c *Conn) peerQuiet() bool {
	switch {
	case c.fc == FlowCredit:
		return c.mseq-c.peerAck <= 1 // only our DisConn
	case c.fc.ring():
		return c.ringAcked == c.ringWr
	}
	return true // transport flow control: no update is ever sent
}

// abort sends AbortConn (best effort) and fails the connection.
func (c *Conn) abort() {
	c.declineSameHost() // what was sent goes before the reset, as over TCP
	if c.phase() == stEstablished && c.credits() >= 1 {
		c.sendControl(MIDAbortConn)
		_ = c.flush()
	}
	c.fail(unix.ECONNRESET)
}

// SetFd moves the connection to another descriptor of the same socket, when
// the one it used is closed but a duplicate stays open.
func (c *Conn) SetFd(fd int) {
	c.mu.Lock()
	c.tr.SetFd(fd)
	c.unlock()
}

// Queued returns the bytes the application can read now (FIONREAD).
func (c *Conn) Queued() int {
	c.mu.Lock()
	defer c.unlock()
	c.progress(time.Now())
	n := c.rqBytes
	if c.zsink != nil {
		n += c.zsink.n - c.zsink.done
	}
	return n
}

// RecvStalled reports whether the bytes queued for the application are all
// the connection takes before the application reads some: the engine holds
// its most (rxMax), or the peer has no room left to send into (fewer than
// the two credits a Data message needs, or a full ring, as far as we have
// told it). The shim's SO_RCVLOWAT then gives way, as TCP's low-water mark
// does once its receive window is closed.
func (c *Conn) RecvStalled() bool {
	c.mu.Lock()
	defer c.unlock()
	c.progress(time.Now())
	if c.rqBytes >= c.rxMax() {
		return true
	}
	if c.phase() != stEstablished {
		return false
	}
	if c.fc == FlowCredit {
		return c.advBufs-int(c.recvSeq-c.advAck) < 2
	}
	return c.fc.ring() && c.ring != nil && int(c.ringIn-c.ringAdv) >= len(c.ring)
}

// Unsent returns the bytes taken from the application but not yet handed to
// the kernel (the user-space part of SIOCOUTQ).
func (c *Conn) Unsent() int {
	c.mu.Lock()
	defer c.unlock()
	return c.tr.TxPending()
}
