package iwarp

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"golang.org/x/sys/unix"
	"libsdp/internal/testnet"
)

// Loopback harness: two QPs over a real TCP connection on 127.0.0.1, set
// up with a real MPA Request/Reply exchange, driven by poll(2) with bounded
// waits. No test sleeps: every wait is a poll on the sockets.

// tcpPair returns the two ends of a loopback TCP connection: the connecting
// one and the accepted one.
func tcpPair(t testing.TB) (int, int) { return testnet.TCPPair(t) }

// peer is one end of the harness: a QP and what it received.
type peer struct {
	qp    *QP
	segs  []DDPSegment // untagged segments returned, payload copied
	comps []Completion
	err   error // first fault from NextSegment
	eof   bool
}

const testTimeout = 10 * time.Second

// waitFd polls fd for ev, at most ms milliseconds.
func waitFd(t testing.TB, fd int, ev int16, ms int) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: ev}}
	_, err := unix.Poll(pfd, ms)
	if err != nil && err != unix.EINTR {
		t.Fatalf("poll: %v", err)
	}
}

// readRaw reads into p.qp until the MPA frame of the given kind is whole.
func (p *peer) readMPA(t testing.TB, reply bool) MPAFrame {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		f, n, err := ParseMPAFrame(p.qp.Raw(), reply)
		if err == nil {
			f.PrivateData = append([]byte(nil), f.PrivateData...)
			p.qp.ConsumeRaw(n)
			return f
		}
		require.ErrorIs(t, err, ErrNeedMore)
		require.True(t, time.Now().Before(deadline), "timed out waiting for the MPA frame")
		waitFd(t, p.qp.Fd(), unix.POLLIN, 100)
		if _, err := p.qp.Fill(); err != nil && err != unix.EAGAIN {
			t.Fatalf("fill: %v", err)
		}
	}
}

// flushAll writes everything p has queued, waiting for room.
func (p *peer) flushAll(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		err := p.qp.Flush()
		if err == nil {
			return
		}
		require.ErrorIs(t, err, unix.EAGAIN)
		require.True(t, time.Now().Before(deadline), "timed out flushing")
		waitFd(t, p.qp.Fd(), unix.POLLOUT, 100)
	}
}

type pairOpts struct {
	markers, crc bool // markers in both directions, CRC
}

// qpPair connects two QPs: a is the MPA initiator (it sends the Request),
// b the responder.
func qpPair(t testing.TB, o pairOpts) (a, b *peer) {
	t.Helper()
	cfd, afd := tcpPair(t)
	return qpPairOn(t, o, cfd, afd, 1448)
}

// qpPairOn is qpPair over a given connection, FPDUs cut for mss (0: the
// socket's TCP_MAXSEG).
func qpPairOn(t testing.TB, o pairOpts, cfd, afd, mss int) (a, b *peer) {
	t.Helper()
	a, b = &peer{qp: NewQP(afd)}, &peer{qp: NewQP(cfd)}
	a.qp.WriteRaw(AppendMPAFrame(nil, &MPAFrame{Markers: o.markers, CRC: o.crc, Rev: 1, PrivateData: []byte("libsdp iwarp test")}))
	a.flushAll(t)
	req := b.readMPA(t, false)
	b.qp.WriteRaw(AppendMPAFrame(nil, &MPAFrame{Reply: true, Markers: o.markers, CRC: o.crc, Rev: 1}))
	b.flushAll(t)
	rep := a.readMPA(t, true)
	crc := req.CRC || rep.CRC
	// M in a frame asks for markers in what its sender receives.
	a.qp.StartFullOperation(rep.Markers, req.Markers, crc, DefaultMarkerSpacing, mss)
	b.qp.StartFullOperation(req.Markers, rep.Markers, crc, DefaultMarkerSpacing, mss)
	return a, b
}

// step moves p once: flush, read what is there, handle every whole
// segment. It reports whether anything happened.
func (p *peer) step(t testing.TB) bool {
	t.Helper()
	moved := false
	if p.qp.TxPending() > 0 {
		before := p.qp.TxPending()
		if err := p.qp.Flush(); err != nil && err != unix.EAGAIN {
			t.Fatalf("flush: %v", err)
		}
		moved = p.qp.TxPending() != before
	}
	if p.err != nil || p.eof {
		return moved
	}
	for i := 0; i < 64; i++ {
		n, err := p.qp.Fill()
		if err == unix.EAGAIN {
			break
		}
		if err == ErrClosed {
			p.eof = true
			break
		}
		require.NoError(t, err)
		moved = moved || n > 0
		if !p.drain(t) {
			break
		}
	}
	p.comps = p.qp.PollCompletions(p.comps)
	return moved
}

// drain handles the whole segments received; false after a fault.
func (p *peer) drain(t testing.TB) bool {
	for {
		seg, err := p.qp.NextSegment()
		if err == ErrNeedMore {
			return true
		}
		if err != nil {
			var e *Error
			require.True(t, errors.As(err, &e), "fault of type %T: %v", err, err)
			p.err = err
			return false
		}
		s := seg.DDPSegment
		s.Payload = append([]byte(nil), seg.Payload...)
		seg.Release()
		p.segs = append(p.segs, s)
	}
}

// run steps both peers until done returns true, failing after testTimeout.
func run(t testing.TB, a, b *peer, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for i := 0; !done(); i++ {
		require.True(t, time.Now().Before(deadline), "timed out after %d rounds", i)
		ma, mb := a.step(t), b.step(t)
		if ma || mb || done() {
			continue
		}
		pfd := []unix.PollFd{{Fd: int32(a.qp.Fd()), Events: unix.POLLIN}, {Fd: int32(b.qp.Fd()), Events: unix.POLLIN}}
		if a.qp.TxPending() > 0 {
			pfd[0].Events |= unix.POLLOUT
		}
		if b.qp.TxPending() > 0 {
			pfd[1].Events |= unix.POLLOUT
		}
		if _, err := unix.Poll(pfd, 100); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
	}
}

// message joins the payloads of the untagged segments of one message, from
// index i of segs, and returns the index after it.
func message(t testing.TB, segs []DDPSegment, i int) ([]byte, int) {
	t.Helper()
	var m []byte
	for ; i < len(segs); i++ {
		require.Equal(t, uint32(len(m)), segs[i].MO)
		m = append(m, segs[i].Payload...)
		if segs[i].Last {
			return m, i + 1
		}
	}
	t.Fatalf("message not complete")
	return nil, i
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>9)
	}
	return b
}

var loopbackModes = []struct {
	name string
	o    pairOpts
}{{"markers+crc", pairOpts{true, true}}, {"crc", pairOpts{false, true}}, {"none", pairOpts{false, false}}}

func forModes(t *testing.T, f func(t *testing.T, o pairOpts)) {
	for _, m := range loopbackModes {
		t.Run(m.name, func(t *testing.T) { f(t, m.o) })
	}
}

// waitArrived waits until p's socket holds at least n unread octets.
func waitArrived(t testing.TB, p *peer, n uint64) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		have, err := unix.IoctlGetInt(p.qp.Fd(), unix.SIOCINQ)
		require.NoError(t, err)
		if uint64(have) >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "timed out: %d of %d octets arrived", have, n)
		waitFd(t, p.qp.Fd(), unix.POLLIN, 100)
	}
}
