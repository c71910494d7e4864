package sdpcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Read ZCopy (SDP's zero copy for large sends): the source registers the
// application's buffer for remote read and sends SrcAvail (Len, STag, TO);
// the sink, once the application calls recv with a buffer, registers that
// buffer and RDMA-Reads the data straight into it, then sends
// RdmaRdCompl(Len read). A sink whose application asks in a call that may
// not wait (non-blocking, MSG_PEEK) sends SendSM instead, and the source
// sends what was not read by buffer copy. The source's send call returns
// only when all of its buffer was read or handed to buffer copy: the
// peer reads the application's memory while it waits.
//
// ZCopy is used for a send of at least SDP_ZCOPY_THRESHOLD bytes in one
// buffer from a call that waits (SendWait), when nothing is queued before
// it. No payload byte passes through an SDP buffer; iwarp sends Read
// Responses from the region itself (gather: the kernel reads the
// application's buffer, valid because the call returns only once the sink
// has read it) and places them on the sink straight from the socket where
// it can. Copies it makes after all are counted.

// SendWait says the caller blocks until the send completes, so bufs stay
// valid for the whole call: the condition for zero copy.
const SendWait SendFlags = 1 << 1

// RecvWait says the caller blocks until data arrives, so bufs stay valid
// for the whole call: the condition for RDMA-Reading into them.
const RecvWait RecvFlags = 1 << 1

// DefaultZCopyThreshold is SDP_ZCOPY_THRESHOLD's default: no zero copy. The
// papers use it for large messages, from 32 KiB (Balaji, Bhagvat, Thakur and
// Panda, "Sockets Direct Protocol for Hybrid Network Stacks: A Case Study
// with iWARP over 10G Ethernet", §2.1), where a NIC moves the data; over
// kernel TCP its round trip and a half per send loses to buffer copy at
// every size measured (docs/PERFORMANCE.md), so it is for whoever selects it.
const DefaultZCopyThreshold = 0

const (
	srcAvailLen    = BSDHLen + 16 // SrcAH: Len(4) STag(4) TO(8)
	rdmaRdComplLen = BSDHLen + 4  // RRCH: Len(4)
	// zcopyCancel: a sink that has read nothing of an offer this long
	// after it is cancelled. Two peers that both make a large blocking
	// send before reading would otherwise wait for each other for ever,
	// where TCP's buffers would have taken both sends.
	zcopyCancel = 20 * time.Millisecond
)

// zsrc is the source side of the outstanding SrcAvail.
type zsrc struct {
	stag   STag
	buf    []byte // the offered bytes: the application's, or our copy once detached
	n      int
	read   int  // bytes the sink reported read (RdmaRdCompl)
	sendSM bool // the sink asked for buffer copy of the rest
	// detached: the call that offered it ended first (CancelSend); the
	// region reads from our copy and progress finishes the offer.
	detached  bool
	cancelled bool // SrcAvailCancel sent
	cancelAt  time.Time
	nudgeAt   time.Time
	nudges    int
	copied0   uint64 // the transport's TxCopied when offered
}

// zcopyMaxOffer bounds one SrcAvail: a larger send is offered in parts, so
// that a call that ends early (CancelSend) copies at most this much, as a
// TCP send buffer holds at most a few MiB.
const zcopyMaxOffer = 4 << 20

// The SrcAvailCancel exchange: the source sends SrcAvailCancel; the sink
// finishes a Read it has started (RdmaRdCompl) and answers SendSM, after
// which the source sends the rest by buffer copy.

// zsink is the sink side of an advertised SrcAvail.
type zsink struct {
	stag STag
	to   uint64
	n    int
	done int
	// reading: a Read into the application's buffer is in flight (got:
	// complete, RdmaRdCompl not sent yet); cancelled: the source sent
	// SrcAvailCancel.
	reading, got, cancelled bool
	// The Read: our region, its buffer (a copy once detached: the call
	// that asked ended first), the Read's id, DirectPlaced before it.
	rstag    STag
	rbuf     []byte
	rid      uint64
	placed0  uint64
	detached bool
}

func (c *Conn) zcopyOK(bufs [][]byte, flags SendFlags) bool {
	return flags&SendWait != 0 && c.cfg.ZCopyThreshold > 0 && len(bufs) > 0 && len(bufs[0]) >= c.cfg.ZCopyThreshold &&
		c.phase() == stEstablished && c.zsrc == nil && len(c.early) == 0 && c.heldLen() == 0 && !c.wrShut() && !c.closed &&
		!time.Now().Before(c.zcopyPause)
}

// zcopyBackoff: after an offer the sink read nothing of, buffer copy only
// for this long: its application is not in a receive call.
const zcopyBackoff = time.Second

// zcopyNudge and zcopyNudges: how often and how many times a source whose
// cancelled offer got no answer sends an empty Data message (sendZCopy);
// eight of them carry more octets than a damaged 8-bit length can claim.
const (
	zcopyNudge  = 500 * time.Millisecond
	zcopyNudges = 8
)

// startZCopy offers buf (at most zcopyMaxOffer of it) by SrcAvail. The
// call then waits outside the lock, as for any ErrWouldBlock, and calls
// again with the same buffer (collectZCopy). It reports false when it
// made no offer (no credit, no region): the caller uses buffer copy.
// Called locked.
func (c *Conn) startZCopy(buf []byte, now time.Time) bool {
	if c.credits() < 2 {
		return false
	}
	buf = buf[:min(len(buf), zcopyMaxOffer)]
	stag, err := c.tr.Register(buf, AccessRemoteRead)
	if err != nil {
		return false
	}
	wait := c.cfg.ZCopyCancel
	if wait <= 0 {
		wait = zcopyCancel
	}
	c.zsrc = &zsrc{stag: stag, buf: buf, n: len(buf), cancelAt: orNow(now).Add(wait), copied0: c.tr.TxCopied()}
	var b [srcAvailLen]byte
	binary.BigEndian.PutUint32(b[BSDHLen:], uint32(len(buf)))
	binary.BigEndian.PutUint32(b[BSDHLen+4:], uint32(stag))
	binary.BigEndian.PutUint64(b[BSDHLen+8:], 0)
	c.postMessage(MIDSrcAvail, b[:])
	c.dataSeq = c.mseq
	c.stats.ZCopyReadSends++
	_ = c.flush()
	return true
}

// postMessage queues m, a zero-copy message (SrcAvail, RdmaRdCompl,
// SinkAvail, RdmaWrCompl) of MID mid whose body after the BSDH is filled
// in: it takes the next MSeq, advertises the posted buffers and encodes
// the BSDH in front. It uses one credit. Called locked.
func (c *Conn) postMessage(mid MID, m []byte) {
	c.mseq++
	c.advertise()
	EncodeBSDH(m, BSDHFields{MID: mid, Bufs: uint16(c.posted), Len: uint32(len(m)), MSeq: c.mseq, MSeqAck: c.recvSeq})
	c.tr.PostSend(m)
	c.lastDataLen = 0
	c.stats.MsgsTx++
}

// zsrcAnswered reports that the offer needs nothing more from the peer:
// all of it read, SendSM, or the connection over.
func (c *Conn) zsrcAnswered() bool {
	z := c.zsrc
	// After the peer's FIN it can send nothing more: no RDMA Read
	// Request, no RdmaRdCompl or SendSM. Waiting for one would hang.
	// A detached offer outlives the descriptor: the peer may still be
	// reading it, and what it does not read goes by buffer copy.
	return z.read == z.n || z.sendSM || c.phase() != stEstablished || (c.closed && !z.detached) || c.eof
}

// zsrcTimers cancels an offer nothing of which was read within
// zcopyCancel, and nudges a silent sink after that. Called from progress.
func (c *Conn) zsrcTimers(now time.Time) {
	z := c.zsrc
	if z == nil || c.zsrcAnswered() {
		return
	}
	now = orNow(now)
	if !z.cancelled && (z.detached || (z.read == 0 && !now.Before(z.cancelAt))) && c.credits() >= 1 {
		z.cancelled = true
		z.nudgeAt = now.Add(zcopyNudge)
		c.sendControl(MIDSrcAvailCncl)
		c.stats.ZCopyCancels++
	}
	// A stream damaged on the way (a ULPDU_Length made larger) leaves the
	// sink waiting for octets that would complete a frame, while this
	// side waits for its answer. Empty Data messages bring those octets,
	// so the sink's CRC check fails and the connection ends instead of
	// hanging; a healthy sink just takes them as credit updates.
	if z.cancelled && z.nudges < zcopyNudges && !now.Before(z.nudgeAt) && c.credits() >= 1 {
		z.nudges++
		z.nudgeAt = now.Add(zcopyNudge)
		c.sendControl(MIDData)
	}
}

// zsrcDeadline is when zsrcTimers next has something to do (zero: never).
func (c *Conn) zsrcDeadline() time.Time {
	z := c.zsrc
	switch {
	case z == nil || c.zsrcAnswered():
		return time.Time{}
	case !z.cancelled && z.read == 0:
		return z.cancelAt
	case z.cancelled && z.nudges < zcopyNudges:
		return z.nudgeAt
	}
	return time.Time{}
}

// zsrcReady reports that the call that made the offer can collect it.
func (c *Conn) zsrcReady() bool {
	return c.zsrc != nil && !c.zsrc.detached && c.zsrcAnswered()
}

// collectZCopy is the offering call coming back (same buffer): it returns
// the bytes taken once the offer is answered, ErrWouldBlock before.
func (c *Conn) collectZCopy(buf []byte, now time.Time) (int, error) {
	z := c.zsrc
	if z.detached || !sameBuf(buf, z.buf) {
		return 0, ErrWouldBlock // another call's offer comes first
	}
	c.zsrcTimers(now)
	if !c.zsrcAnswered() {
		_ = c.flush()
		return 0, ErrWouldBlock
	}
	return c.finishZCopy(now)
}

// finishZCopy ends the answered offer: the region is invalidated and what
// the sink did not read goes by buffer copy.
func (c *Conn) finishZCopy(now time.Time) (int, error) {
	z := c.zsrc
	// The peer's Read Responses are framed when its Read Requests arrive,
	// so once the sink says it read them the region is no longer needed.
	c.tr.Invalidate(z.stag)
	c.zsrc = nil
	c.stats.ZCopyTx += uint64(z.read)
	c.stats.PayloadTx += uint64(z.read)
	// The transport sends Read Responses from the region itself, unless
	// it had to copy them because the region went before the kernel took
	// them.
	c.stats.UserCopiesTx += c.tr.TxCopied() - z.copied0
	if c.phase() != stEstablished || c.closed || c.eof {
		if z.read > 0 {
			return z.read, nil
		}
		return 0, c.sendErr()
	}
	n := z.read
	if n == 0 {
		c.zcopyPause = orNow(now).Add(zcopyBackoff)
	}
	if n < z.n { // SendSM: the rest by buffer copy
		n += c.push([][]byte{z.buf[n:]}, z.n-n, now, true)
	}
	_ = c.flush()
	if n == 0 {
		return 0, ErrWouldBlock
	}
	return n, nil
}

// CancelSend ends a send call whose buffer is offered by SrcAvail before
// the peer answered (a signal): the region moves to a copy of ours, so the
// peer never reads the application's buffer again, SrcAvailCancel is sent,
// and the connection finishes the offer by itself (progress, Background),
// the rest going by buffer copy before anything sent later. It returns the
// bytes the call returns: all of the offer, taken as TCP's send buffer
// takes bytes, or those already sent when the offer was answered; 0 means
// the call ends with its error.
func (c *Conn) CancelSend(buf []byte) int {
	c.mu.Lock()
	defer c.unlock()
	z := c.zsrc
	if z == nil || z.detached || !sameBuf(buf, z.buf) {
		return 0
	}
	now := time.Now()
	if c.zsrcAnswered() {
		n, _ := c.finishZCopy(now)
		return n
	}
	priv := make([]byte, z.n)
	c.tr.Rebind(z.stag, priv)
	z.buf, z.detached = priv, true
	c.stats.UserCopiesTx += uint64(z.n - z.read)
	c.zsrcTimers(now)
	_ = c.flush()
	return z.n
}

// finishDetached ends a detached offer once it is answered: the rest goes
// out first, from our copy, by buffer copy. Called from progress.
func (c *Conn) finishDetached(now time.Time) {
	z := c.zsrc
	if z == nil || !z.detached || !c.zsrcAnswered() {
		return
	}
	c.tr.Invalidate(z.stag)
	c.zsrc = nil
	c.stats.ZCopyTx += uint64(z.read)
	c.stats.PayloadTx += uint64(z.read)
	c.stats.UserCopiesTx += c.tr.TxCopied() - z.copied0
	if rest := z.buf[z.read:]; len(rest) > 0 && c.phase() == stEstablished && !c.eof {
		c.early = append(rest, c.early...) // before what later calls queued there
		c.drainEarly(now)
	}
	c.changes++
}

func (c *Conn) sendErr() error {
	if c.phase() == stFailed {
		return errnoOf(c.err)
	}
	if c.closed || c.wrShut() || c.eof {
		return unix.EPIPE
	}
	return ErrWouldBlock
}

// onSrcAvail records the peer's offer. Bytes queued before it are read
// first; the offer then reads as data.
func (c *Conn) onSrcAvail(h BSDH) error {
	if h.Len() != srcAvailLen || len(h) < srcAvailLen {
		return fmt.Errorf("sdp: SrcAvail of %d bytes, want %d (no inline data)", h.Len(), srcAvailLen)
	}
	if c.zsink != nil {
		return errors.New("sdp: SrcAvail while another is outstanding")
	}
	n := int(binary.BigEndian.Uint32(h[BSDHLen:]))
	if n == 0 {
		return errors.New("sdp: SrcAvail of 0 bytes")
	}
	c.zsink = &zsink{stag: STag(binary.BigEndian.Uint32(h[BSDHLen+4:])), to: binary.BigEndian.Uint64(h[BSDHLen+8:]), n: n}
	c.edges++
	return nil
}

// onRdmaRdCompl and onSendSM answer our SrcAvail.
func (c *Conn) onRdmaRdCompl(h BSDH) error {
	if h.Len() != rdmaRdComplLen || len(h) < rdmaRdComplLen || c.zsrc == nil {
		return errors.New("sdp: unexpected RdmaRdCompl")
	}
	n := int(binary.BigEndian.Uint32(h[BSDHLen:]))
	if n > c.zsrc.n-c.zsrc.read {
		return fmt.Errorf("sdp: RdmaRdCompl of %d bytes, %d were offered", n, c.zsrc.n-c.zsrc.read)
	}
	c.zsrc.read += n
	c.changes++
	return nil
}

// onSrcAvailCancel withdraws the peer's offer: at once when no Read is in
// flight, otherwise once it completes (recvZCopy). SendSM answers it.
func (c *Conn) onSrcAvailCancel() error {
	if c.zsink == nil {
		// Already answered by a SendSM of ours, or read to the end.
		return nil
	}
	c.zsink.cancelled = true
	if !c.zsink.reading {
		c.zsink = nil
		c.pendingSM = true
	}
	c.changes++
	return nil
}

// sendPendingSM sends the SendSM a cancel asked for, credits permitting,
// and the other zero-copy messages and timers that wait for progress.
func (c *Conn) sendPendingSM(now time.Time) {
	c.readProgress()
	if c.pendingSM && c.phase() == stEstablished && c.credits() >= 1 {
		c.pendingSM = false
		c.sendControl(MIDSendSM)
	}
	c.sendPendingWZ()
	c.zsrcTimers(now)
	c.finishDetached(now)
}

func (c *Conn) onSendSM() error {
	if c.zsrc == nil {
		return errors.New("sdp: SendSM without an outstanding SrcAvail")
	}
	c.zsrc.sendSM = true
	c.changes++
	return nil
}

// recvZCopy moves the offered data into b by RDMA Read when the caller
// waits, or asks for buffer copy when it does not. Called locked with
// nothing queued before the offer. A caller that waits gets ErrWouldBlock
// once the Read Request is out, waits outside the lock as for any, and
// comes back with the same buffer for the bytes read (collectRead); a
// call that ends first calls CancelRecv.
func (c *Conn) recvZCopy(b []byte, flags RecvFlags, now time.Time) (int, error) {
	z := c.zsink
	if flags&RecvWait == 0 || flags&RecvPeek != 0 || len(b) == 0 {
		// The rest comes by buffer copy, after what was read: SendSM, as
		// soon as a credit allows.
		c.zsink = nil
		c.pendingSM = true
		c.sendPendingSM(now)
		_ = c.flush()
		return 0, ErrWouldBlock
	}
	n := min(len(b), z.n-z.done)
	b = b[:n]
	stag, err := c.tr.Register(b, AccessLocalWrite)
	if err != nil {
		return 0, err
	}
	id, err := c.tr.PostRead(stag, 0, z.stag, z.to+uint64(z.done), uint32(n))
	if err != nil {
		c.tr.Invalidate(stag)
		return 0, err
	}
	z.reading, z.got = true, false
	z.rstag, z.rbuf, z.rid, z.placed0 = stag, b, id, c.tr.DirectPlaced()
	_ = c.flush()
	c.readProgress()
	return c.collectRead(b)
}

// collectRead returns the bytes our completed Read placed in b, for the
// call that offered b; ErrWouldBlock before, or for another call.
func (c *Conn) collectRead(b []byte) (int, error) {
	if c.rdCollect == nil || !sameBuf(b, c.rdCollect) {
		return 0, ErrWouldBlock
	}
	n := len(c.rdCollect)
	c.rdCollect = nil
	return n, nil
}

// readProgress completes our Read of the peer's offer once its data is
// in, and then sends RdmaRdCompl, which needs a credit and must precede
// any SendSM: the offer stays "reading" until it is queued, so a
// SrcAvailCancel that comes meanwhile is only noted. Called locked, from
// progress and recvZCopy.
func (c *Conn) readProgress() {
	z := c.zsink
	if z == nil || !z.reading {
		return
	}
	if !z.got {
		c.comps = c.tr.PollCompletions(c.comps[:0])
		for _, comp := range c.comps {
			if comp.Kind == CompReadDone && comp.ID == z.rid {
				z.got = true
			}
		}
		if !z.got {
			if c.phase() != stEstablished || c.eof {
				// The Read will not complete: the call sees the error.
				c.tr.Invalidate(z.rstag)
				z.reading = false
			}
			return
		}
		c.tr.Invalidate(z.rstag)
		n := len(z.rbuf)
		z.done += n
		direct := min(uint64(n), c.tr.DirectPlaced()-z.placed0)
		c.stats.ZCopyRx += uint64(n)
		c.stats.PayloadRx += uint64(n)
		c.stats.UserCopiesRx += uint64(n) - direct
		c.stats.DirectPlacedRx += direct
		if z.detached {
			// The call that asked has ended: the bytes are in our copy
			// and read as data.
			c.stats.UserCopiesRx += uint64(n)
			c.rq = append(c.rq, piece{data: z.rbuf})
			c.rqBytes += n
		} else {
			c.rdCollect = z.rbuf
		}
		c.edges++
		c.changes++
	}
	if c.phase() != stEstablished || c.credits() < 1 {
		return
	}
	var m [rdmaRdComplLen]byte
	binary.BigEndian.PutUint32(m[BSDHLen:], uint32(len(z.rbuf)))
	c.postMessage(MIDRdmaRdCompl, m[:])
	z.reading, z.got, z.detached, z.rbuf = false, false, false, nil
	if z.done == z.n || z.cancelled {
		c.zsink = nil
		c.pendingSM = z.cancelled && z.done < z.n
	}
}

// detachRead ends the call waiting for our Read into b: the region moves
// to a copy of ours, whose bytes are read as data once the Read completes.
// It returns the bytes the call returns when the Read had completed.
func (c *Conn) detachRead(b []byte) int {
	if c.rdCollect != nil && (b == nil || sameBuf(b, c.rdCollect)) {
		n := len(c.rdCollect)
		c.rdCollect = nil
		if b == nil { // closing: nobody collects them
			return 0
		}
		return n
	}
	z := c.zsink
	if z == nil || !z.reading || z.got || z.detached || (b != nil && !sameBuf(b, z.rbuf)) {
		return 0
	}
	if b == nil {
		// Closing: the call that lent the buffer may have returned (with
		// an error) and the program freed it; the octets are not wanted.
		z.rbuf, z.detached = c.tr.Detach(z.rstag), true
		return 0
	}
	priv := make([]byte, len(z.rbuf))
	c.tr.Rebind(z.rstag, priv)
	z.rbuf, z.detached = priv, true
	return 0
}

func (c *Conn) recvErr() error {
	if c.phase() == stFailed {
		return errnoOf(c.err)
	}
	return ErrWouldBlock
}
