package sdpcore

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"libsdp/iwarp"
)

// offerSink makes the sink's blocking receive of buf offer it by SinkAvail
// and drives the source until it holds that offer.
func offerSink(t *testing.T, sink, src *Conn, buf []byte, until time.Time) {
	t.Helper()
	n, err := sink.Recv([][]byte{buf}, RecvWait, time.Now())
	require.Equal(t, ErrWouldBlock, err, "the receive offers its buffer and waits (got %d bytes)", n)
	sink.mu.Lock()
	require.NotNil(t, sink.zw, "a SinkAvail is out")
	sink.mu.Unlock()
	driveUntil(t, src, func() bool { return src.zws != nil }, until, "the source never took the SinkAvail")
}

func randBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// TestWriteZCopy: a blocking receive of 1 MiB with nothing buffered offers
// its buffer by SinkAvail; the source's next send RDMA-Writes into it and
// sends RdmaWrCompl; the receive returns that count, every byte right, no
// buffer copy on either side, in every flow-control mode.
func TestWriteZCopy(t *testing.T) {
	const total = 1 << 20
	data := randBytes(total, 21)
	for fc := FlowCredit; fc < numFlowControls; fc++ {
		t.Run(fc.String(), func(t *testing.T) {
			a, p, until := zcopyPair(t, fc)
			for round := range 3 {
				as0, ps0 := a.Stats(), p.Stats()
				buf := make([]byte, total)
				offerSink(t, a, p, buf, until)
				n, err := p.SendFlags([][]byte{data}, SendWait, time.Now())
				require.NoError(t, err)
				require.Equal(t, total, n)
				n, err = recvWait(t, a, buf, RecvWait, until)
				require.NoError(t, err)
				require.Equal(t, total, n)
				require.Equal(t, -1, firstDiff(data, buf), "round %d", round)
				as, ps := a.Stats(), p.Stats()
				require.EqualValues(t, 1, as.ZCopySinkAvails-as0.ZCopySinkAvails)
				require.EqualValues(t, 1, ps.ZCopyWriteSends-ps0.ZCopyWriteSends)
				require.Zero(t, ps.ZCopyReadSends-ps0.ZCopyReadSends, "no SrcAvail: the SinkAvail was there")
				require.Zero(t, ps.BCopySends-ps0.BCopySends, "no buffer copy")
				require.EqualValues(t, total, as.ZCopyWriteRx-as0.ZCopyWriteRx)
				require.EqualValues(t, total, as.PayloadRx-as0.PayloadRx)
				copies, direct := as.UserCopiesRx-as0.UserCopiesRx, as.DirectPlacedRx-as0.DirectPlacedRx
				require.EqualValues(t, total, copies+direct, "every byte placed once")
				require.Zero(t, copies, "the sink copies no payload byte (%d placed straight from the socket)", direct)
				// The source sends from the application's buffer; what the kernel
				// did not take before the call returned is copied then.
				t.Logf("round %d: source copied %d of %d bytes", round, ps.UserCopiesTx-ps0.UserCopiesTx, total)
			}
		})
	}
}

// TestWriteZCopyNotNegotiated: a peer whose Hello lacks the capability
// never receives SinkAvail, and neither side sends one.
func TestWriteZCopyNotNegotiated(t *testing.T) {
	cfd, afd := tcpPair(t)
	cfg := testConfig()
	cfg.Sanitize()
	h := &Hello{Bufs: uint16(cfg.RecvBufs), IPVersion: 4, MaxAdverts: 1,
		DesRemRcvSz: uint32(cfg.BufSize), LocalRcvSz: uint32(cfg.BufSize), LocalPort: 80}
	req := iwarp.AppendMPAFrame(nil, &iwarp.MPAFrame{Markers: cfg.Markers, CRC: cfg.CRC, Rev: 1, PrivateData: AppendHello(nil, h)})
	_, err := unix.Write(afd, req)
	require.NoError(t, err)
	p, err := NewPassive(afd, cfg, req)
	require.NoError(t, err)
	a := NewActive(cfd, cfg, time.Now())
	closeAtCleanup(t, a, p)
	oneWay(t, p, a, 1)
	data := randBytes(256<<10, 22)
	until := time.Now().Add(20 * time.Second)
	for _, dir := range [][2]*Conn{{p, a}, {a, p}} {
		src, sink := dir[0], dir[1]
		done := make(chan error, 1)
		go func() { done <- sendWait(t, src, data, until) }()
		got, err := recvN(t, sink, len(data), len(data), RecvWait, until)
		require.NoError(t, err)
		require.NoError(t, <-done)
		require.True(t, bytes.Equal(data, got))
	}
	for _, c := range []*Conn{a, p} {
		require.False(t, c.peerWZ)
		require.Zero(t, c.Stats().ZCopySinkAvails)
		require.Zero(t, c.Stats().ZCopyWriteSends)
	}
}

// TestWriteZCopyCrossing: data that the source sent before it saw the
// SinkAvail makes the SinkAvail stale; the sink reads that data, cancels
// (SinkAvailCancel, SinkCancelAck) and the next receive offers again. A
// SrcAvail crossing a SinkAvail wins: the sink cancels and RDMA-Reads.
func TestWriteZCopyCrossing(t *testing.T) {
	const big = 256 << 10
	for _, fc := range []FlowControl{FlowCredit, FlowNIC, FlowTransport} {
		t.Run(fc.String()+"/data", func(t *testing.T) {
			a, p, until := zcopyPair(t, fc)
			buf := make([]byte, big)
			_, err := a.Recv([][]byte{buf}, RecvWait, time.Now())
			require.Equal(t, ErrWouldBlock, err)
			small := randBytes(1000, 23)
			n, err := p.Send([][]byte{small}, time.Now()) // does not read: the SinkAvail is still unseen
			require.NoError(t, err)
			require.Equal(t, len(small), n)
			n, err = recvWait(t, a, buf, RecvWait, until)
			require.NoError(t, err)
			require.Equal(t, small, buf[:n])
			require.EqualValues(t, 1, a.Stats().ZCopyCancels)
			// The cancel is answered; then a fresh offer is used.
			data := randBytes(big, 24)
			buf2 := make([]byte, big)
			for {
				a.mu.Lock()
				idle := a.zw == nil
				a.mu.Unlock()
				if idle {
					break
				}
				_, _ = p.Recv([][]byte{make([]byte, 1)}, 0, time.Now()) // the source answers as it runs
				require.NoError(t, wait(t, a, EvIn|EvOut, time.Now().Add(100*time.Millisecond)))
				_, _, _, err := a.Poll(EvIn, time.Now())
				require.NoError(t, err)
				require.True(t, time.Now().Before(until))
			}
			offerSink(t, a, p, buf2, until)
			n, err = p.SendFlags([][]byte{data}, SendWait, time.Now())
			require.NoError(t, err)
			require.Equal(t, big, n)
			n, err = recvWait(t, a, buf2, RecvWait, until)
			require.NoError(t, err)
			require.Equal(t, big, n)
			require.Equal(t, -1, firstDiff(data, buf2))
			require.EqualValues(t, 1, p.Stats().ZCopyWriteSends)
		})
		t.Run(fc.String()+"/srcavail", func(t *testing.T) {
			a, p, until := zcopyPair(t, fc)
			data := randBytes(big, 25)
			done := make(chan error, 1)
			go func() { done <- sendWait(t, p, data, until) }()
			// The SrcAvail is on its way; the sink offers its buffer
			// without reading it first (white box: the two cross).
			for p.Stats().ZCopyReadSends == 0 {
				require.True(t, time.Now().Before(until))
				time.Sleep(time.Millisecond)
			}
			buf := make([]byte, big)
			a.mu.Lock()
			require.True(t, a.postSinkAvail(buf))
			a.mu.Unlock()
			got := 0
			for got < big {
				n, err := recvWait(t, a, buf[got:], RecvWait, until)
				require.NoError(t, err)
				got += n
			}
			require.NoError(t, <-done)
			require.Equal(t, -1, firstDiff(data, buf))
			as, ps := a.Stats(), p.Stats()
			require.EqualValues(t, 1, as.ZCopyCancels, "the sink cancelled its SinkAvail")
			require.Zero(t, ps.ZCopyWriteSends, "the source ignored the SinkAvail")
			t.Logf("RDMA-Read %d of %d bytes", ps.ZCopyTx, big) // all, unless the offer timed out first
		})
	}
}

// TestWriteZCopyCancel: a receive call that ends before the source wrote
// (CancelRecv) gets its buffer back at once: a write that was already on
// its way lands in a private copy and is read as data by the next call,
// in order; the application's buffer is never touched again.
func TestWriteZCopyCancel(t *testing.T) {
	const big = 256 << 10
	for _, written := range []bool{false, true} {
		name := "before-write"
		if written {
			name = "after-write"
		}
		t.Run(name, func(t *testing.T) {
			a, p := connPair(t, testConfig())
			oneWay(t, p, a, 1)
			until := time.Now().Add(30 * time.Second)
			buf := make([]byte, big)
			offerSink(t, a, p, buf, until)
			data := randBytes(big, 26)
			if written {
				n, err := p.SendFlags([][]byte{data}, SendWait, time.Now())
				require.NoError(t, err)
				require.Equal(t, big, n)
			}
			require.Zero(t, a.CancelRecv(buf), "nothing was reported written when the call ended")
			for i := range buf {
				buf[i] = 0xA5
			}
			if !written {
				done := make(chan error, 1)
				go func() { done <- sendBytes(t, p, data, 0, until) }()
				defer func() { require.NoError(t, <-done) }()
			}
			got, err := recvN(t, a, big, 64<<10, 0, until)
			require.NoError(t, err)
			require.Equal(t, -1, firstDiff(data, got))
			for i, b := range buf {
				require.Equal(t, byte(0xA5), b, "the cancelled buffer was written at %d", i)
			}
			require.EqualValues(t, 1, a.Stats().ZCopyCancels)
			if written {
				require.EqualValues(t, 1, p.Stats().ZCopyWriteSends)
			}
		})
	}
}

// TestWriteZCopyHostile: SinkAvail and RdmaWrCompl that do not fit what
// was offered or written end that connection with a clear error, and only
// it.
func TestWriteZCopyHostile(t *testing.T) {
	const big = 64 << 10
	for _, tc := range []struct {
		name, want string
		send       func(t *testing.T, sink, src *Conn, buf []byte)
	}{
		{"RdmaWrCompl-unwritten", "RdmaWrCompl of 4096 bytes; 0 were written", func(t *testing.T, sink, src *Conn, buf []byte) {
			sendRaw(src, MIDRdmaWrCompl, binary.BigEndian.AppendUint32(nil, 4096))
		}},
		{"RdmaWrCompl-beyond", "RdmaWrCompl of", func(t *testing.T, sink, src *Conn, buf []byte) {
			src.mu.Lock()
			z := src.zws
			src.tr.PostWrite(z.stag, 0, [][]byte{make([]byte, 100)})
			src.mu.Unlock()
			sendRaw(src, MIDRdmaWrCompl, binary.BigEndian.AppendUint32(nil, big+1))
		}},
		{"write-bad-STag", "not valid", func(t *testing.T, sink, src *Conn, buf []byte) {
			src.mu.Lock()
			src.tr.PostWrite(src.zws.stag+1, 0, [][]byte{make([]byte, 100)})
			_ = src.flush()
			src.mu.Unlock()
		}},
		{"write-beyond-region", "outside the region", func(t *testing.T, sink, src *Conn, buf []byte) {
			src.mu.Lock()
			src.tr.PostWrite(src.zws.stag, big-50, [][]byte{make([]byte, 100)})
			_ = src.flush()
			src.mu.Unlock()
		}},
		{"SinkAvail-twice", "SinkAvail while another is outstanding", func(t *testing.T, sink, src *Conn, buf []byte) {
			var m [20]byte
			binary.BigEndian.PutUint32(m[:], 100)
			sendRaw(sink, MIDSinkAvail, m[:])
		}},
		{"SinkCancelAck-unasked", "SinkCancelAck with no SinkAvailCancel", func(t *testing.T, sink, src *Conn, buf []byte) {
			sendRaw(src, MIDSinkCancelAck, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, p := connPair(t, testConfig())
			oneWay(t, p, a, 1)
			// A second connection of the same process goes on.
			a2, p2 := connPair(t, testConfig())
			until := time.Now().Add(20 * time.Second)
			buf := make([]byte, big)
			offerSink(t, a, p, buf, until)
			tc.send(t, a, p, buf)
			victim, peer := a, p
			if tc.name == "SinkAvail-twice" {
				victim, peer = p, a
			}
			var err error
			for {
				if victim == a {
					_, err = a.Recv([][]byte{buf}, RecvWait, time.Now())
				} else {
					_, err = p.Recv([][]byte{make([]byte, 16)}, 0, time.Now())
				}
				if err != ErrWouldBlock {
					break
				}
				require.NoError(t, wait(t, victim, EvIn, until), "victim %v", victim)
			}
			require.ErrorIs(t, err, unix.EIO)
			require.Contains(t, victim.Err().Error(), tc.want)
			for {
				_, err = peer.Recv([][]byte{make([]byte, 16)}, 0, time.Now())
				if err != ErrWouldBlock {
					break
				}
				require.NoError(t, wait(t, peer, EvIn, until))
			}
			require.Error(t, err, "the peer learns the connection ended")
			oneWay(t, p2, a2, 100<<10)
			oneWay(t, a2, p2, 100<<10)
		})
	}
}

// sendRaw queues a message with MID mid and body after the BSDH (white
// box: a peer that sends it) and flushes it.
func sendRaw(c *Conn, mid MID, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mseq++
	c.advertise()
	m := make([]byte, BSDHLen+len(body))
	EncodeBSDH(m, BSDHFields{MID: mid, Bufs: uint16(c.posted), Len: uint32(len(m)), MSeq: c.mseq, MSeqAck: c.recvSeq})
	copy(m[BSDHLen:], body)
	c.tr.PostSend(m)
	_ = c.flush()
}

// FuzzWriteZCopy feeds both ends of Write ZCopy arbitrary SinkAvail,
// RdmaWrCompl, SinkAvailCancel and SinkCancelAck messages: whatever the
// peer claims, a receive never returns more than its buffer or than was
// written into it, and a bad claim is an error rather than a panic.
func FuzzWriteZCopy(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 16, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		newConn := func() *Conn {
			c := &Conn{tr: overQP(iwarp.NewQP(-1)), fc: FlowCredit, st: stEstablished, peerWZ: true, bufSize: 1 << 16}
			c.peerBufs, c.posted = 1<<10, 1<<10
			c.qp().StartFullOperation(false, false, false, 0, 1460) // what it sends is only queued
			return c
		}
		sink, src := newConn(), newConn()
		buf := make([]byte, 4096)
		stag, err := sink.tr.Register(buf, AccessRemoteWrite)
		require.NoError(t, err)
		sink.tr.WatchWrites(stag)
		sink.zw = &zwsink{stag: stag, buf: buf}
		for len(ops) >= 9 {
			kind, body := ops[0]%5, ops[1:9]
			ops = ops[9:]
			mseq := binary.BigEndian.Uint32(body[4:])
			h := func(mid MID, l int) BSDH {
				m := make([]byte, l)
				EncodeBSDH(m, BSDHFields{MID: mid, Len: uint32(l), MSeqAck: mseq})
				copy(m[BSDHLen:], body)
				return BSDH(m)
			}
			switch kind {
			case 0:
				_ = src.onSinkAvail(h(MIDSinkAvail, sinkAvailLen))
				if src.zws != nil {
					require.NotZero(t, src.zws.n)
				}
			case 1:
				if sink.onRdmaWrCompl(h(MIDRdmaWrCompl, rdmaWrComplLen)) == nil && sink.zw != nil {
					require.LessOrEqual(t, sink.zw.written, len(buf))
					require.Equal(t, sink.zw.written, sink.tr.Written(), "only what was written")
				}
			case 2:
				_ = src.onSinkAvailCancel(h(MIDSinkAvailCncl, BSDHLen))
				require.Nil(t, src.zws)
			case 3:
				_ = sink.onSinkCancelAck()
			case 4:
				sink.cancelSink(body[0]&1 == 0, body[0]&2 == 0)
			}
			require.LessOrEqual(t, sink.rqBytes, len(buf))
		}
	})
}

// TestCloseDoesNotReadLentBuffer: a receive call that lent its buffer by
// SinkAvail may return (with an error) and the program free the buffer
// before it closes the descriptor; closing must then not read the buffer
// (it moved the region to a copy of it, and a freed buffer faults: seen as
// a SIGSEGV in a program that closed after EIO).
func TestCloseDoesNotReadLentBuffer(t *testing.T) {
	a, p := connPair(t, testConfig())
	oneWay(t, p, a, 1)
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 64<<10+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	require.NoError(t, err)
	buf := mem[:64<<10]
	_, err = a.Recv([][]byte{buf}, RecvWait, time.Now())
	require.Equal(t, ErrWouldBlock, err)
	a.mu.Lock()
	lent := a.zw != nil
	a.mu.Unlock()
	require.True(t, lent, "the receive offered its buffer by SinkAvail")
	require.NoError(t, unix.Munmap(mem)) // the program's call returned and it freed the buffer
	a.Close(time.Now())                  // faults if it reads the buffer
}
