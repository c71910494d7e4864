package sdpcore

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sender-managed receive ring: the rdma and nic flow-control modes (Balaji,
// Bhagvat, Panda, Thakur and Gropp, "Advanced Flow-control Mechanisms for the
// Sockets Direct Protocol over InfiniBand", §3, §4).
//
// Each side registers one ring of RecvBufs·BufSize bytes for remote write
// and names it to the peer: the connecting side in HelloAck, the accepting
// side in a ChRcvBuf message that is its first FPDU. The sender keeps both
// ends of the peer's ring: it places data at its write position with RDMA
// Write (split in two at the wrap) and then sends Immediate Data, whose 8
// octets are the length written (BE32) and how many bytes of the sender's
// own ring its application has read, all time (BE32). So data of any size
// is packed end to end, no buffer is wasted on a small message, and every
// message returns ring space to the peer for free. A receiver whose
// application frees half the ring without having sent anything tells the
// peer in an Immediate Data of length 0.
//
// When the peer's ring is full, sends are copied into a bounded send buffer
// (held) and the call returns: later sends coalesce with them and go out as
// one large write once space comes back. In rdma mode only a later call of
// the application sends them (the paper's stalled progress, §3.2); nic mode
// asks the engine for a background flush as soon as anything is held.

// ringMsgMax caps one ring write: in nic mode the virtual window, the
// peer's buffer size; in rdma mode as much as fits, up to this many bytes.
const ringMsgMax = 256 << 10

func (c *Conn) makeRing() error {
	size := c.cfg.RecvBufs * c.cfg.BufSize
	if l := kernelBufSize(c.cfg.RcvBuf); l > 0 && l < size {
		// The application's SO_RCVBUF bounds what the peer may write
		// ahead of its reads, as it bounds TCP's window (bufsize.go): an
		// engine draining the socket in the background would otherwise
		// take a whole default ring that the application never reads.
		size = l
	}
	c.ring = make([]byte, size)
	stag, err := c.tr.Register(c.ring, AccessRemoteWrite|AccessLocalWrite)
	if err != nil {
		c.ring = nil
		return fmt.Errorf("sdp: registering the receive ring: %w", err)
	}
	c.ringSTag = stag
	// Integrated buffering lets the transport read ring data from the socket
	// straight into the ring; separate buffering keeps iWARP's own receive
	// buffer in between (stage, then copy), as an RNIC-style stack does.
	c.tr.SetDirectPlacement(c.cfg.Buffering == BufIntegrated)
	return nil
}

func (c *Conn) dropRing() {
	if c.ring != nil {
		c.tr.Invalidate(c.ringSTag)
		c.ring = nil
	}
}

// announceRing sends ChRcvBuf with Size = our ring's length and, after it,
// the ring's STag (BE32).
func (c *Conn) announceRing() {
	var b [BSDHLen + 8]byte
	c.mseq++
	c.advertise()
	EncodeBSDH(b[:], BSDHFields{MID: MIDChRcvBuf, Bufs: uint16(c.posted), Len: uint32(len(b)), MSeq: c.mseq, MSeqAck: c.recvSeq})
	binary.BigEndian.PutUint32(b[BSDHLen:], uint32(len(c.ring)))
	binary.BigEndian.PutUint32(b[BSDHLen+4:], uint32(c.ringSTag))
	c.tr.PostSend(b[:])
	c.lastDataLen = 0
	c.stats.MsgsTx++
}

// onRingAnnounce takes the peer's ring from its ChRcvBuf message.
func (c *Conn) onRingAnnounce(h BSDH) error {
	if h.Len() != BSDHLen+8 || len(h) < BSDHLen+8 {
		return fmt.Errorf("sdp: ChRcvBuf of %d bytes, want %d", h.Len(), BSDHLen+8)
	}
	size := binary.BigEndian.Uint32(h[BSDHLen:])
	if err := checkRing(size); err != nil {
		return fmt.Errorf("sdp: ChRcvBuf: %w", err)
	}
	c.peerRingSize, c.peerRing = size, STag(binary.BigEndian.Uint32(h[BSDHLen+4:]))
	return nil
}

// onRingData handles one Immediate Data message: payload the peer wrote
// into our ring, and the ring space it gives back to us.
func (c *Conn) onRingData(imm []byte) error {
	if len(imm) != ImmediateLen {
		return errors.New("sdp: Immediate Data of the wrong length")
	}
	n := binary.BigEndian.Uint32(imm)
	ack := binary.BigEndian.Uint32(imm[4:])
	if int32(ack-c.ringAcked) < 0 || int32(c.ringWr-ack) < 0 {
		return fmt.Errorf("sdp: ring acknowledgement %d outside [%d, %d]", ack, c.ringAcked, c.ringWr)
	}
	c.ringAcked = ack
	size := uint32(len(c.ring))
	if n > size-(c.ringIn-c.ringFreed) {
		return fmt.Errorf("sdp: peer wrote %d bytes into a ring with %d free", n, size-(c.ringIn-c.ringFreed))
	}
	c.stats.MsgsRx++
	if n == 0 {
		c.changes++ // ring space: a held send may go
		return nil
	}
	if c.closed {
		c.abort()
		return nil
	}
	off := c.ringIn % size
	first := min(n, size-off)
	c.rq = append(c.rq, piece{data: c.ring[off : off+first], ring: true})
	if n > first {
		c.rq = append(c.rq, piece{data: c.ring[:n-first], ring: true})
	}
	c.ringIn += n
	c.rqBytes += int(n)
	c.stats.PayloadRx += uint64(n)
	// The transport placed it into the ring either straight from the socket or by
	// a copy from its receive chunk: only the second is a user-space copy.
	placed := c.tr.DirectPlaced()
	direct := min(uint64(n), placed-c.directSeen)
	c.directSeen = placed
	c.stats.DirectPlacedRx += direct
	c.stats.UserCopiesRx += uint64(n) - direct
	c.edges++
	return nil
}

// maybeAckRing tells the peer of ring space the application emptied, once
// it is half the ring: the peer may be waiting for it.
func (c *Conn) maybeAckRing() {
	if c.phase() != stEstablished || c.ring == nil || c.peerDis() {
		return // a peer that has ended its stream writes no more
	}
	if c.ringFreed-c.ringAdv >= uint32(len(c.ring))/2 {
		c.postImmediate(0)
		c.stats.RingAcks++
	}
}

func (c *Conn) postImmediate(n int) {
	var imm [ImmediateLen]byte
	binary.BigEndian.PutUint32(imm[:], uint32(n))
	binary.BigEndian.PutUint32(imm[4:], c.ringFreed)
	c.ringAdv = c.ringFreed
	c.tr.PostImmediate(imm)
	c.stats.MsgsTx++
}

// preRingRoom is the payload a Data message may still carry in the rdma
// and nic modes before the peer's ring is named (its ChRcvBuf): at most
// the bytes of the buffers its Hello (or HelloAck) offered, which the peer
// always takes in (rxMax). A sender that raced ahead of the ChRcvBuf
// otherwise sent its whole stream as Data messages, which its peer took in
// until it held its most and then left the rest unread: with them the
// ring acknowledgements an echo waited for (TestEchoBackPressure). At the
// bound the sender waits for input, which brings the ChRcvBuf.
func (c *Conn) preRingRoom() int {
	return c.peerBufs*c.peerBufSize - c.preRingSent
}

// ringSend says whether data goes by RDMA Writes into the peer's ring: in
// the rdma and nic modes once the peer has named it. Before that (a
// connecting side between its Reply and the peer's ChRcvBuf) data goes in
// Data messages, which every receiver takes.
func (c *Conn) ringSend() bool { return c.fc.ring() && c.peerRingSize != 0 }

func (c *Conn) ringRoom() int {
	if c.peerRingSize == 0 {
		return 0
	}
	return int(c.peerRingSize - (c.ringWr - c.ringAcked))
}

func (c *Conn) ringMsgMax() int {
	if c.fc == FlowNIC {
		return c.peerBufSize - BSDHLen
	}
	return ringMsgMax
}

func (c *Conn) heldLen() int { return len(c.held) - c.heldOff }

// drainHeld sends held bytes while the peer's ring has room.
func (c *Conn) drainHeld() {
	for c.heldLen() > 0 && c.phase() == stEstablished && c.tr.TxPending() < c.txBacklog() {
		n := c.heldUrgent(c.heldLen()) // a held urgent byte ends the write before it
		if n == 0 {
			continue // it was the urgent byte, sent in a Data message
		}
		n = min(n, c.ringRoom(), c.ringMsgMax())
		if n <= 0 {
			return
		}
		c.writeRingSplit([][]byte{c.held[c.heldOff : c.heldOff+n]}, n)
		c.heldOff += n
	}
	if c.heldLen() == 0 {
		c.held, c.heldOff = c.held[:0], 0
	}
}

// writeRingSplit is writeRing with the wrap split done on parts.
func (c *Conn) writeRingSplit(parts [][]byte, n int) {
	size := c.peerRingSize
	off := c.ringWr % size
	first := int(min(uint32(n), size-off))
	c.ringParts = gather(c.ringParts[:0], parts, 0, first)
	c.tr.PostWrite(c.peerRing, uint64(off), c.ringParts)
	if n > first {
		c.ringParts = gather(c.ringParts[:0], parts, first, n-first)
		c.tr.PostWrite(c.peerRing, 0, c.ringParts)
	}
	clear(c.ringParts) // the application's buffers
	c.ringWr += uint32(n)
	c.postImmediate(n)
	c.stats.BCopySends++
	c.stats.PayloadTx += uint64(n)
	c.stats.UserCopiesTx += uint64(n)
}

// pushRing sends up to total bytes of bufs into the peer's ring and holds
// what does not fit, as far as the send buffer allows. It returns the
// bytes taken.
func (c *Conn) pushRing(bufs [][]byte, total int) int {
	c.drainHeld()
	sent := 0
	if c.heldLen() == 0 {
		for sent < total && c.phase() == stEstablished && c.tr.TxPending() < c.txBacklog() {
			n := min(total-sent, c.ringRoom(), c.ringMsgMax())
			if n <= 0 {
				break
			}
			c.parts = gather(c.parts[:0], bufs, sent, n)
			c.parts = c.separate(c.parts, n)
			c.writeRingSplit(c.parts, n)
			clear(c.parts)
			sent += n
		}
	}
	if sent < total && c.phase() == stEstablished {
		room := c.txBacklog() - c.heldLen()
		if room > 0 {
			n := min(total-sent, room)
			if c.heldLen() > 0 {
				c.stats.CoalescedSends++
			}
			if c.ringRoom() == 0 {
				c.stats.CreditStalls++
			}
			var parts [4][]byte // on the stack: most sends are one or a few buffers
			for _, p := range gather(parts[:0], bufs, sent, n) {
				c.held = append(c.held, p...)
			}
			c.stats.UserCopiesTx += uint64(n)
			sent += n
		}
	}
	return sent
}
