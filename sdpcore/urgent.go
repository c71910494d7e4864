package sdpcore

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// Urgent data (MSG_OOB) as TCP has it on Linux: the last byte of a send
// with MSG_OOB is the urgent byte; the receiver keeps one mark at a time.
// recv(MSG_OOB) reads the byte (EINVAL when there is none, it was read, or
// SO_OOBINLINE is set; EAGAIN when it is announced but has not arrived);
// without SO_OOBINLINE the byte is left out of the stream. A read stops at
// the mark, SIOCATMARK says whether the read pointer is there, and poll
// reports POLLPRI while the byte waits to be read.
//
// On the wire (the SDP specification's BSDH flags; docs/PROTOCOL.md §4,
// "Urgent data"): the Data message whose last byte is the urgent byte carries
// OOB_PRES; the messages with the bytes before it carry OOB_PEND, so the
// receiver knows early that urgent data is on its way. The urgent byte goes
// in a message of its own, so that no later send can be appended to it.
//
// The ring modes (rdma, nic) write data into the peer's ring without a
// BSDH, so the urgent byte leaves the ring: bytes before it go by RDMA
// Write as usual, after an empty Data message flagged OOB_PEND that
// announces them, and the byte itself follows in a Data message (a Send,
// through the untagged queue) flagged OOB_PRES. Both ride the one ordered
// stream of FPDUs, so the receiver sees ring data and the byte in send
// order. When the ring is full the byte waits in the send buffer at its
// place (heldUrg) and drainHeld sends it once the bytes before it are out.
//
// SIGURG: a new mark (OOB_PEND after none, or OOB_PRES not announced)
// calls OnUrgent, as TCP signals the socket's owner for each new urgent
// pointer.

// OnUrgent, when set, is called with the connection's descriptor when a
// new urgent mark arrives. It runs with the connection locked: it must
// only take note.
var OnUrgent func(fd int)

// SendOOB marks the last byte of the send as urgent (MSG_OOB).
const SendOOB SendFlags = 1 << 2

// RecvFill says the caller has already taken bytes in this call: it stops
// at the urgent mark, as a TCP read does (even with MSG_WAITALL). At the
// mark such a call returns 0 bytes and no error.
const RecvFill RecvFlags = 1 << 2

// EvPri is POLLPRI: urgent data waits to be read.
const EvPri Events = unix.POLLPRI

type urgState uint8

const (
	urgNone   urgState = iota
	urgNotYet          // announced by OOB_PEND, the byte has not arrived
	urgValid           // arrived, not read by recv(MSG_OOB)
	urgRead            // read by recv(MSG_OOB); the mark stays until passed
)

// urgent is a connection's receive-side urgent state.
type urgent struct {
	state urgState
	b     byte
	mark  bool   // the urgent byte's place is still ahead of the reader
	seq   uint64 // its stream offset (rxOut counts)
	// rxPres: the message being received carries OOB_PRES; cand and
	// candSeq: the last byte of it seen so far.
	rxPres  bool
	cand    byte
	candSeq uint64
	candOK  bool
	// heldAt, send side of the ring modes: 1 + the index in held of an
	// urgent byte waiting for ring space to free the bytes before it; 0:
	// none. A newer urgent byte takes its place, as on TCP.
	heldAt int
}

// onOOBFlags takes the OOB flags of a received message's BSDH.
func (c *Conn) onOOBFlags(h BSDH) error {
	f := h.Flags() & (FlagOOBPres | FlagOOBPend)
	if f == 0 {
		return nil
	}
	if h.MID() != MIDData {
		return errors.New("sdp: OOB flags on a " + h.MID().String() + " message")
	}
	if f&FlagOOBPres != 0 {
		if h.Len() == BSDHLen {
			return errors.New("sdp: OOB_PRES on a Data message without payload")
		}
		c.urg.rxPres, c.urg.candOK = true, false
		return nil
	}
	if c.urg.state != urgNotYet {
		c.dropOldMark()
		c.urg.state, c.urg.mark = urgNotYet, false
		c.edges++
		c.newMark()
	}
	return nil
}

// dropOldMark is Linux TCP's rule when a new urgent mark replaces one the
// reader stands at: the old urgent byte, read or not, is skipped (without
// SO_OOBINLINE); an old byte the reader has not reached stays in the
// stream as normal data.
func (c *Conn) dropOldMark() {
	if !c.atMark() || c.rqBytes == 0 || c.oobInline() {
		return
	}
	var one [1]byte
	c.copyOut([][]byte{one[:]}, false)
	c.passedMark()
}

// newMark tells the owner of the socket about a new urgent mark.
func (c *Conn) newMark() {
	if OnUrgent != nil {
		OnUrgent(c.tr.Fd())
	}
}

// onOOBPayload notes the last byte of payload just queued in rq when the
// message carries the urgent byte; at the message's end the byte becomes
// the urgent byte.
func (c *Conn) onOOBPayload(payload []byte, last bool) {
	if !c.urg.rxPres {
		return
	}
	if len(payload) > 0 {
		c.urg.cand = payload[len(payload)-1]
		c.urg.candSeq = c.rxOut + uint64(c.rqBytes) - 1
		c.urg.candOK = true
	}
	if !last {
		return
	}
	c.urg.rxPres = false
	if c.urg.candOK {
		announced := c.urg.state == urgNotYet
		if !announced {
			c.dropOldMark()
		}
		c.urg.state, c.urg.b, c.urg.seq, c.urg.mark = urgValid, c.urg.cand, c.urg.candSeq, true
		c.edges++
		if !announced {
			c.newMark()
		}
	}
}

// oobInline reads SO_OOBINLINE from the socket, which the application set
// there: dup'ed descriptors share it, as on TCP.
func (c *Conn) oobInline() bool {
	v, err := unix.GetsockoptInt(c.tr.Fd(), unix.SOL_SOCKET, unix.SO_OOBINLINE)
	return err == nil && v != 0
}

// atMark says whether the next byte to read is the urgent byte.
func (c *Conn) atMark() bool {
	return c.urg.mark && c.urg.seq == c.rxOut
}

// passedMark ends the urgent state once the reader has gone past the mark.
func (c *Conn) passedMark() {
	if c.urg.mark && c.rxOut > c.urg.seq {
		c.urg.mark = false
		if c.urg.state == urgValid || c.urg.state == urgRead {
			c.urg.state = urgNone
		}
	}
}

// readable reports queued bytes a read would return: a skipped urgent byte
// alone is not one.
func (c *Conn) readable() bool {
	if c.rqBytes == 0 {
		return false
	}
	return c.rqBytes > 1 || !c.atMark() || c.oobInline()
}

// AtMark answers SIOCATMARK.
func (c *Conn) AtMark(now time.Time) bool {
	c.mu.Lock()
	defer c.unlock()
	c.progress(now)
	return c.atMark()
}

// RecvOOB answers recv(MSG_OOB): the urgent byte into b.
func (c *Conn) RecvOOB(b []byte, peek bool, now time.Time) (int, error) {
	c.mu.Lock()
	defer c.unlock()
	c.progress(now)
	if c.fb != nil {
		return 0, c.fb
	}
	if c.urg.state == urgNone || c.urg.state == urgRead || c.oobInline() {
		return 0, unix.EINVAL
	}
	if c.urg.state == urgNotYet {
		if c.peerDis() || c.eof {
			return 0, nil
		}
		if c.phase() == stFailed {
			return 0, errnoOf(c.err)
		}
		return 0, ErrWouldBlock
	}
	if len(b) == 0 {
		return 0, nil
	}
	b[0] = c.urg.b
	if !peek {
		c.urg.state = urgRead
	}
	return 1, nil
}

// recvUrgent is Recv's copy when a mark lies ahead: it stops at the mark
// and, without SO_OOBINLINE, leaves the urgent byte out. ok is false when
// the caller must not read now (a filling call at the mark, or nothing but
// the skipped byte).
func (c *Conn) recvUrgent(bufs [][]byte, flags RecvFlags) (n int, ok bool) {
	peek := flags&RecvPeek != 0
	if c.atMark() {
		if flags&RecvFill != 0 {
			return 0, false
		}
		if !c.oobInline() {
			var one [1]byte
			if peek {
				n = c.copyOut(append([][]byte{one[:]}, bufs...), true)
				return max(n-1, 0), n > 1
			}
			c.copyOut([][]byte{one[:]}, false)
			c.passedMark()
			if c.rqBytes == 0 {
				return 0, false
			}
			return c.copyOut(bufs, false), true
		}
		return c.copyOut(bufs, peek), true
	}
	left := int(c.urg.seq - c.rxOut)
	lim := make([][]byte, 0, len(bufs))
	for _, b := range bufs {
		if left == 0 {
			break
		}
		k := min(len(b), left)
		lim = append(lim, b[:k])
		left -= k
	}
	return c.copyOut(lim, peek), true
}

// sendOOB sends bufs with the last byte urgent: the bytes before it in
// Data messages flagged OOB_PEND, the byte alone in one flagged OOB_PRES.
// A partial count leaves the urgent byte unsent: the caller's next send
// with MSG_OOB carries it (its last byte is the same byte).
func (c *Conn) sendOOB(bufs [][]byte, now time.Time) (int, error) {
	total := totalLen(bufs)
	if total == 0 {
		return 0, nil
	}
	c.corked = false
	if c.phase() != stEstablished || len(c.early) > 0 {
		c.drainEarly(now)
		_ = c.flush()
		if c.phase() != stEstablished || len(c.early) > 0 {
			if c.phase() == stFailed {
				return 0, errnoOf(c.err)
			}
			if c.earlyOOB > 0 || c.wrShut() {
				return 0, ErrWouldBlock // one urgent byte waits at a time
			}
			// Before the connection is up (the accepting program sends
			// urgent data right after accept), the bytes join the early
			// queue with the urgent byte marked, as the kernel takes
			// them into its send buffer; drainEarly sends them as urgent.
			n := c.queueEarly(bufs)
			if n == 0 {
				return 0, ErrWouldBlock
			}
			if n == total {
				c.earlyOOB = len(c.early)
			}
			return n, nil
		}
	}
	sent := c.sendOOBNow(bufs, total, now, true)
	_ = c.flush()
	if sent == 0 {
		return 0, c.sendErr()
	}
	return sent, nil
}

// sendOOBNow sends bufs with the last byte urgent as far as the mode
// allows now; with mayProgress it may read the socket for credits.
func (c *Conn) sendOOBNow(bufs [][]byte, total int, now time.Time, mayProgress bool) int {
	c.promptPeer()
	if c.ringSend() {
		return c.sendOOBRing(bufs, total)
	}
	return c.sendOOBMsgs(bufs, total, now, mayProgress)
}

// sendOOBMsgs is sendOOB in the modes that carry all data in Data messages.
func (c *Conn) sendOOBMsgs(bufs [][]byte, total int, now time.Time, mayProgress bool) int {
	defer func() { c.txFlags = 0 }()
	sent := 0
	if total > 1 {
		c.txFlags = FlagOOBPend
		sent = c.push(bufs, total-1, now, mayProgress)
	}
	if sent == total-1 {
		c.txFlags = FlagOOBPres
		last := [][]byte{lastByte(bufs)}
		sent += c.push(last, 1, now, mayProgress)
	}
	return sent
}

// sendOOBRing is sendOOB in the ring modes: an empty Data message flagged
// OOB_PEND when bytes go before the urgent byte, those bytes into the ring
// (or the send buffer), and the byte in a Data message flagged OOB_PRES,
// at once or, behind held bytes, from drainHeld.
func (c *Conn) sendOOBRing(bufs [][]byte, total int) int {
	if c.phase() != stEstablished || c.tr.TxPending() >= c.txBacklog() {
		return 0
	}
	c.drainHeld()
	if total > 1 || c.heldLen() > 0 {
		c.postOOB(FlagOOBPend, nil)
	}
	sent := 0
	if total > 1 {
		if sent = c.pushRing(bufs, total-1); sent < total-1 {
			return sent
		}
	}
	b := lastByte(bufs)
	switch {
	case c.heldLen() == 0 && c.tr.TxPending() < c.txBacklog():
		c.postOOB(FlagOOBPres, b)
	case c.heldLen() < c.txBacklog():
		c.held = append(c.held, b[0])
		c.urg.heldAt = len(c.held)
		c.stats.UserCopiesTx++
	default:
		return sent // no room: the caller's next send carries the byte
	}
	return sent + 1
}

// postOOB queues a Data message with OOB flags f and payload b (nothing
// or the urgent byte) in a ring mode.
func (c *Conn) postOOB(f uint8, b []byte) {
	c.txFlags = f
	c.parts = c.parts[:0]
	if len(b) > 0 {
		c.parts = append(c.parts, b)
	}
	c.postData(len(b))
	c.txFlags = 0
}

// heldUrgent limits a write of n held bytes so that it stops before a held
// urgent byte; when that byte is next, it sends it and returns 0.
func (c *Conn) heldUrgent(n int) int {
	if c.urg.heldAt == 0 {
		return n
	}
	at := c.urg.heldAt - 1
	if at > c.heldOff {
		return min(n, at-c.heldOff)
	}
	c.urg.heldAt = 0
	c.postOOB(FlagOOBPres, c.held[at:at+1])
	c.heldOff++
	return 0
}

// lastByte returns the last byte of bufs as a one-byte slice.
func lastByte(bufs [][]byte) []byte {
	for i := len(bufs) - 1; i >= 0; i-- {
		if b := bufs[i]; len(b) > 0 {
			return b[len(b)-1:]
		}
	}
	return nil
}
