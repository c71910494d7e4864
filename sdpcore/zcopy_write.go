package sdpcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Write ZCopy (SDP's zero copy for large receives): a sink whose
// application makes a receive call that waits, for at least
// SDP_ZCOPY_THRESHOLD bytes, with nothing buffered, registers the call's
// buffer for remote write and sends SinkAvail (Len, STag, TO). The
// source's next send RDMA-Writes up to Len bytes straight into it and
// sends RdmaWrCompl(bytes written); the sink's call returns that count.
//
// Both ends must have said they know it: CapWriteZCopy in the Hello and
// in the HelloAck. A peer that did not never receives SinkAvail.
//
// Stream order. The written bytes must be the next ones of the stream, so
// the source uses a SinkAvail only when the sink had seen all data the
// source sent before it (the SinkAvail's MSeqAck is at least the MSeq of
// the source's last message with data; in the rdma and nic modes also all
// ring data acknowledged) and nothing else waits to be sent: otherwise it
// is stale and the source ignores it. Once the source holds a SinkAvail,
// its next send goes into it; a send that cannot (urgent data, MSG_MORE)
// drops it first. So data that reaches the sink while its SinkAvail is
// out means the source will never write into that buffer: the sink sends
// SinkAvailCancel and reads the data as usual. A SrcAvail crossing a
// SinkAvail is such data: the source ignores the SinkAvail (it has an
// offer out), the sink cancels its SinkAvail and answers the SrcAvail.
//
// Cancel. The sink cancels with SinkAvailCancel when its call ends first
// (data came by buffer copy, the call was interrupted or the descriptor
// closed); the source answers every SinkAvailCancel with SinkCancelAck,
// after the RdmaWrCompl of a write it had already made. Until that answer
// the sink sends no new SinkAvail. A call that ends before the source
// answered takes its buffer back at once: the region is moved to a
// private buffer (iwarp's Rebind), whose bytes, if the source's write
// comes after all, are read as ordinary data.

// CapWriteZCopy is the Hello/HelloAck capability bit (the Cap nibble of
// byte 1; bits 0 and 1 are the SDP specification's INVALIDATE_CAP and
// EXTENDED_MAXADVERTS) saying that the sender takes part in Write ZCopy.
const CapWriteZCopy = 0x04

const (
	sinkAvailLen   = BSDHLen + 20 // SinkAH: Len(4) STag(4) TO(8) NonDisc(4)
	rdmaWrComplLen = BSDHLen + 4  // RWCH: Len(4)
)

// zwsink is the sink side of our outstanding SinkAvail.
type zwsink struct {
	stag    STag
	buf     []byte // the application's buffer; a private copy once cancelled
	written int    // bytes the source reported written (RdmaWrCompl)
	// done: RdmaWrCompl came; cancelled: the call ended first (the region
	// was moved to a private buffer); cancelSent: SinkAvailCancel is out.
	done, cancelled, cancelSent bool
	placed0                     uint64 // the transport's DirectPlaced when offered
}

// zwsrc is the source side of the peer's SinkAvail.
type zwsrc struct {
	stag STag
	to   uint64
	n    int
	// dataSeq and ringWr when it was taken: any data sent since (a send
	// call that read it on its way) makes it stale.
	dataSeq, ringWr uint32
}

// zwsUsable drops the peer's SinkAvail if data went out since we took it.
func (c *Conn) zwsUsable() bool {
	if z := c.zws; z != nil && (z.dataSeq != c.dataSeq || z.ringWr != c.ringWr) {
		c.zws = nil
	}
	return c.zws != nil
}

// writeZCopyOK says whether a receive call may offer b by SinkAvail.
func (c *Conn) writeZCopyOK(b []byte, flags RecvFlags) bool {
	return c.peerWZ && flags&RecvWait != 0 && flags&(RecvPeek|RecvFill) == 0 && c.cfg.ZCopyThreshold > 0 &&
		len(b) >= c.cfg.ZCopyThreshold && c.phase() == stEstablished && c.zw == nil && c.zsink == nil &&
		c.rqBytes == 0 && !c.inMsg && !c.peerDis() && !c.eof && !c.closed && c.credits() >= 2
}

// postSinkAvail registers b for the peer's RDMA Write and offers it.
func (c *Conn) postSinkAvail(b []byte) bool {
	stag, err := c.tr.Register(b, AccessRemoteWrite|AccessLocalWrite)
	if err != nil {
		return false
	}
	if c.fc.ring() && c.ringFreed != c.ringAdv {
		// The source checks that all its ring data was read before the
		// SinkAvail was sent: tell it before the SinkAvail.
		c.postImmediate(0)
		c.stats.RingAcks++
	}
	c.tr.WatchWrites(stag)
	c.zw = &zwsink{stag: stag, buf: b, placed0: c.tr.DirectPlaced()}
	var m [sinkAvailLen]byte
	binary.BigEndian.PutUint32(m[BSDHLen:], uint32(len(b)))
	binary.BigEndian.PutUint32(m[BSDHLen+4:], uint32(stag))
	c.postMessage(MIDSinkAvail, m[:])
	c.stats.ZCopySinkAvails++
	_ = c.flush()
	return true
}

// sameBuf reports whether a and b start at the same byte.
func sameBuf(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// recvWritePending handles a Recv while our SinkAvail is out. handled
// false lets Recv go on as if there were none.
func (c *Conn) recvWritePending(b []byte) (n int, err error, handled bool) {
	z := c.zw
	if z.cancelled {
		return 0, nil, false // its bytes, if any come, are read as data
	}
	if !z.done && (c.rqBytes > 0 || c.zsink != nil || c.peerDis() || c.eof || c.phase() != stEstablished) {
		// Data (or its end) came another way: the source will not write
		// into the buffer (see the stream-order rule above).
		c.cancelSink(true, false)
		return 0, nil, false
	}
	if !sameBuf(b, z.buf) {
		// Another thread's call: the one that offered its buffer is
		// still waiting.
		return 0, ErrWouldBlock, true
	}
	if z.done {
		c.zw = nil
		return z.written, nil, true
	}
	return 0, ErrWouldBlock, true
}

// cancelSink ends our SinkAvail's hold on the application's buffer: the
// region moves to a private buffer, and SinkAvailCancel is sent (or sent
// once a credit allows, sendPendingSM). It returns the bytes already
// written into the buffer that the ending call must return.
// With crossed the source is known never to write into it: the region is
// just invalidated.
//
// With closing the application's buffer may already be gone (the call that
// lent it returned with an error, and the program freed it): the region
// moves to a fresh buffer without reading the old one.
func (c *Conn) cancelSink(crossed, closing bool) int {
	z := c.zw
	if z == nil || z.cancelled {
		return 0
	}
	if z.done {
		c.zw = nil
		return z.written
	}
	z.cancelled = true
	if c.phase() == stEstablished && !c.eof {
		switch {
		case crossed:
			c.tr.Invalidate(z.stag)
		case closing:
			z.buf = c.tr.Detach(z.stag)
		default:
			priv := make([]byte, len(z.buf))
			c.tr.Rebind(z.stag, priv)
			z.buf = priv
		}
		c.stats.ZCopyCancels++
		c.sendPendingWZ()
	} else {
		c.tr.Invalidate(z.stag)
		c.zw = nil
	}
	return 0
}

// CancelRecv ends a receive call that offered its buffer by SinkAvail
// before the source wrote into it, or whose RDMA Read of the peer's
// SrcAvail into it is in flight (a signal, a timeout). It returns the
// bytes the call must return: those already placed in the buffer, if the
// transfer completed; 0 means the call ends with its error. After it the
// peer's data never lands in the buffer: a transfer still on its way goes
// into a copy of ours and is read as data by the next call.
func (c *Conn) CancelRecv(b []byte) int {
	c.mu.Lock()
	defer c.unlock()
	if c.zw == nil || c.zw.cancelled || !sameBuf(b, c.zw.buf) {
		return c.detachRead(b) // or our RDMA Read into it (Read ZCopy)
	}
	n := c.cancelSink(false, false)
	_ = c.flush()
	return n
}

// onSinkAvail takes the peer's offer of its buffer, or ignores it when it
// is stale.
func (c *Conn) onSinkAvail(h BSDH) error {
	if !c.peerWZ {
		return errors.New("sdp: SinkAvail from a peer that did not negotiate Write ZCopy")
	}
	if h.Len() != sinkAvailLen || len(h) < sinkAvailLen {
		return fmt.Errorf("sdp: SinkAvail of %d bytes, want %d (no inline data)", h.Len(), sinkAvailLen)
	}
	if c.sinkOut {
		return errors.New("sdp: SinkAvail while another is outstanding")
	}
	n := binary.BigEndian.Uint32(h[BSDHLen:])
	if n == 0 || n > 1<<30 {
		return fmt.Errorf("sdp: SinkAvail of %d bytes", n)
	}
	c.sinkOut = true
	stale := int32(h.MSeqAck()-c.dataSeq) < 0 || c.zsrc != nil || len(c.early) > 0 || c.corked || c.heldLen() > 0 ||
		(c.fc.ring() && c.ringAcked != c.ringWr) || c.wrShut() || c.closed
	if !stale {
		c.zws = &zwsrc{stag: STag(binary.BigEndian.Uint32(h[BSDHLen+4:])), to: binary.BigEndian.Uint64(h[BSDHLen+8:]), n: int(n),
			dataSeq: c.dataSeq, ringWr: c.ringWr}
		c.changes++
	}
	return nil
}

// onSinkAvailCancel answers the peer's cancel with SinkCancelAck. It is
// legal while its SinkAvail is out, or when it crossed our RdmaWrCompl.
func (c *Conn) onSinkAvailCancel(h BSDH) error {
	if !c.sinkOut && (c.wrComplSeq == 0 || int32(h.MSeqAck()-c.wrComplSeq) >= 0) {
		return errors.New("sdp: SinkAvailCancel with no SinkAvail outstanding")
	}
	c.zws = nil
	c.sinkOut = false
	c.pendingCancelAck = true
	c.changes++
	return nil
}

// onRdmaWrCompl completes our SinkAvail: the source says it wrote n bytes
// into the buffer, which must be what its RDMA Writes placed there.
func (c *Conn) onRdmaWrCompl(h BSDH) error {
	z := c.zw
	if h.Len() != rdmaWrComplLen || len(h) < rdmaWrComplLen || z == nil || z.done {
		return errors.New("sdp: unexpected RdmaWrCompl")
	}
	n := int(binary.BigEndian.Uint32(h[BSDHLen:]))
	if w := c.tr.Written(); n != w || n == 0 || n > len(z.buf) {
		return fmt.Errorf("sdp: RdmaWrCompl of %d bytes; %d were written into a buffer of %d", n, w, len(z.buf))
	}
	if !z.cancelled && c.rqBytes > 0 {
		// The written bytes would come before data that came first.
		return errors.New("sdp: RdmaWrCompl after data sent by buffer copy since the SinkAvail")
	}
	c.tr.WatchWrites(0)
	direct := min(uint64(n), c.tr.DirectPlaced()-z.placed0)
	c.directSeen += direct // not the ring's (ring.go)
	c.stats.ZCopyRx += uint64(n)
	c.stats.ZCopyWriteRx += uint64(n)
	c.stats.PayloadRx += uint64(n)
	c.stats.DirectPlacedRx += direct
	c.stats.UserCopiesRx += uint64(n) - direct
	c.edges++
	c.changes++
	if !z.cancelled {
		c.tr.Invalidate(z.stag)
		z.done, z.written = true, n
		return nil
	}
	// The call that offered the buffer has ended: the bytes are in our
	// private copy and read as data, in stream order.
	c.tr.Invalidate(z.stag)
	if c.closed {
		c.abort() // data for a descriptor the application closed: as TCP, reset
		return nil
	}
	c.stats.UserCopiesRx += uint64(n) // the read out of the private copy, below
	c.rq = append(c.rq, piece{data: z.buf[:n]})
	c.rqBytes += n
	z.buf = nil
	return nil
}

// onSinkCancelAck ends our cancelled SinkAvail.
func (c *Conn) onSinkCancelAck() error {
	if c.zw == nil || !c.zw.cancelSent {
		return errors.New("sdp: SinkCancelAck with no SinkAvailCancel outstanding")
	}
	c.tr.Invalidate(c.zw.stag)
	c.tr.WatchWrites(0)
	c.zw = nil
	c.changes++
	return nil
}

// sendWrite sends from bufs into the peer's SinkAvail by RDMA Write and
// completes it with RdmaWrCompl. Called locked with c.zws set.
func (c *Conn) sendWrite(bufs [][]byte, now time.Time) (int, error) {
	z := c.zws
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total == 0 {
		return 0, nil
	}
	if c.credits() < 2 {
		c.progress(now)
		if c.zws != z || !c.zwsUsable() { // cancelled meanwhile
			return 0, ErrWouldBlock
		}
		if c.credits() < 2 || c.phase() != stEstablished {
			c.stats.CreditStalls++
			c.creditStalled = true
			return 0, ErrWouldBlock
		}
	}
	n := min(total, z.n)
	copied0 := c.tr.TxCopied()
	var src []byte
	if n <= len(bufs[0]) {
		// Sent from the application's buffer itself (PostWriteFrom);
		// what the kernel does not take before the call returns is
		// copied then (Settle).
		src = bufs[0][:n]
		c.tr.PostWriteFrom(z.stag, z.to, src)
	} else {
		c.parts = gather(c.parts[:0], bufs, 0, n)
		c.tr.PostWrite(z.stag, z.to, c.parts)
		clear(c.parts)
		c.stats.UserCopiesTx += uint64(n)
	}
	var m [rdmaWrComplLen]byte
	binary.BigEndian.PutUint32(m[BSDHLen:], uint32(n))
	c.postMessage(MIDRdmaWrCompl, m[:])
	c.dataSeq, c.wrComplSeq = c.mseq, c.mseq
	c.zws, c.sinkOut = nil, false
	c.stats.ZCopyWriteSends++
	c.stats.ZCopyTx += uint64(n)
	c.stats.PayloadTx += uint64(n)
	_ = c.flush()
	if src != nil {
		c.tr.Settle(src)
		c.stats.UserCopiesTx += c.tr.TxCopied() - copied0
	}
	return n, nil
}

// sendPendingWZ sends the Write ZCopy control messages that wait for a
// credit: our SinkAvailCancel and the SinkCancelAck answering the peer's.
func (c *Conn) sendPendingWZ() {
	if c.phase() != stEstablished {
		return
	}
	if c.pendingCancelAck && c.credits() >= 1 {
		c.pendingCancelAck = false
		c.sendControl(MIDSinkCancelAck)
	}
	if z := c.zw; z != nil && z.cancelled && !z.cancelSent && c.credits() >= 1 {
		z.cancelSent = true
		c.sendControl(MIDSinkAvailCncl)
	}
}

// firstBuf returns the first non-empty buffer of bufs, or nil.
func firstBuf(bufs [][]byte) []byte {
	for _, b := range bufs {
		if len(b) > 0 {
			return b
		}
	}
	return nil
}
