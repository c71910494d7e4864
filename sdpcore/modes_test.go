package sdpcore

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// matrixBytes is how much each side sends per combination in
// TestModesMatrix. make test-matrix runs it with 64 MiB, without the race
// detector; the default keeps go test -race ./sdpcore quick.
var matrixBytes = flag.Int("sdp.matrix-bytes", 1<<20, "bytes each way per mode combination in TestModesMatrix")

type modeCase struct {
	fc           FlowControl
	buf          Buffering
	prog         Progress
	markers, crc bool
}

func (m modeCase) String() string {
	return fmt.Sprintf("%v/%v/%v/markers=%v/crc=%v", m.fc, m.buf, m.prog, m.markers, m.crc)
}

func (m modeCase) config() Config {
	cfg := testConfig()
	cfg.FlowControl, cfg.Buffering, cfg.Progress = m.fc, m.buf, m.prog
	cfg.Markers, cfg.CRC = m.markers, m.crc
	return cfg
}

func allModes() []modeCase {
	var out []modeCase
	for fc := FlowCredit; fc < numFlowControls; fc++ {
		for _, buf := range []Buffering{BufIntegrated, BufSeparate} {
			for _, prog := range []Progress{ProgressInline, ProgressAsync} {
				for _, markers := range []bool{true, false} {
					for _, crc := range []bool{true, false} {
						out = append(out, modeCase{fc, buf, prog, markers, crc})
					}
				}
			}
		}
	}
	return out
}

// TestModesMatrix streams random data both ways at once in every
// combination of flow control, buffering, progress, markers and CRC, with
// send sizes from 1 byte to 1 MiB, blocking and non-blocking senders and
// random receive sizes, and checks every byte.
//
// Whether a given large blocking send goes by zero copy depends on timing
// (nothing held back, two credits free at that instant: a loaded machine
// may see neither in one case's run), so zero copy is required of each flow
// control over its 16 cases, not of each case; TestZCopy checks it case by
// case where the receiver is known to wait.
func TestModesMatrix(t *testing.T) {
	zcopies := map[FlowControl]uint64{}
	for i, m := range allModes() {
		t.Run(m.String(), func(t *testing.T) {
			sa, sp := exchangeModes(t, m.config(), *matrixBytes, int64(100+i))
			zcopies[m.fc] += sa.ZCopyReadSends + sp.ZCopyReadSends + sa.ZCopyWriteSends + sp.ZCopyWriteSends
			for _, s := range []Stats{sa, sp} {
				require.Equal(t, m.fc.String(), s.FlowControl)
				require.Equal(t, m.buf.String(), s.Buffering)
				require.Equal(t, m.prog.String(), s.Progress)
				require.EqualValues(t, *matrixBytes, s.PayloadRx)
				require.EqualValues(t, *matrixBytes, s.PayloadTx)
				require.NotZero(t, s.BCopySends)
				require.GreaterOrEqual(t, s.UserCopiesTx, s.PayloadTx-s.ZCopyTx, "at least one copy per byte sent by buffer copy")
				if m.buf == BufSeparate {
					require.GreaterOrEqual(t, s.UserCopiesRx, 2*(s.PayloadRx-s.ZCopyRx), "separate buffering copies twice on receive")
				}
				require.LessOrEqual(t, s.ZCopyTx, s.PayloadTx)
				if m.markers {
					require.NotZero(t, s.Rx.Markers)
				} else {
					require.Zero(t, s.Rx.Markers)
				}
			}
		})
	}
	for fc := FlowCredit; fc < numFlowControls; fc++ {
		if _, ran := zcopies[fc]; ran {
			assert.NotZero(t, zcopies[fc], "%v: large blocking calls went by zero copy (SrcAvail or SinkAvail)", fc)
		}
	}
}

// exchangeModes is exchange with senders that mix blocking and
// non-blocking calls and sizes up to 1 MiB.
func exchangeModes(t *testing.T, cfg Config, size int, seed int64) (Stats, Stats) {
	return exchangeWith(t, cfg, size, seed, sendMixed)
}

// sendMixed sends data in random pieces of 1 byte to 1 MiB (most of them
// small); each piece is sent either as a non-blocking call would (take
// what is taken, come back later) or as a blocking one (wait until all of
// the piece is taken).
func sendMixed(t *testing.T, c *Conn, data []byte, rng *rand.Rand, until time.Time) error {
	for len(data) > 0 {
		var n int
		switch rng.Intn(4) {
		case 0:
			n = 1 + rng.Intn(64)
		case 1:
			n = 1 + rng.Intn(4096)
		case 2:
			n = 1 + rng.Intn(64<<10)
		default:
			n = 1 + rng.Intn(1<<20)
		}
		n = min(n, len(data))
		blocking := rng.Intn(2) == 0
		piece := data[:n]
		var flags SendFlags
		if blocking {
			flags = SendWait // the buffer stays valid for the call: zero copy may be used
		}
		for len(piece) > 0 {
			k, err := c.SendFlags([][]byte{piece}, flags, time.Now())
			if c.NeedsBackground() { // as the engine does after every send
				go c.Background(time.Minute)
			}
			if err == ErrWouldBlock {
				if err := wait(t, c, EvOut, until); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			piece = piece[k:]
			data = data[k:]
			if !blocking {
				break
			}
		}
	}
	return nil
}

// closeBoth closes both ends as the engine does: a connection that cannot
// finish at once lingers on a duplicate of its socket.
// The application's close of its descriptor is a shutdown here (the test
// closes the descriptor at cleanup): the peer sees the end of the stream,
// which a lingering peer waits for.
func closeBoth(t *testing.T, cs ...*Conn) {
	var wg sync.WaitGroup
	for _, c := range cs {
		fd := c.Fd()
		if c.Close(time.Now()) {
			_ = unix.Shutdown(fd, unix.SHUT_RDWR)
			continue
		}
		d := mustDup(t, fd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Linger(d, time.Now().Add(10*time.Second), nil)
			_ = unix.Shutdown(fd, unix.SHUT_RDWR)
		}()
	}
	wg.Wait()
}

// TestFlowControlNegotiation: both ends use a mode only when both asked
// for it; otherwise, and with a peer that asks for nothing, credit.
func TestFlowControlNegotiation(t *testing.T) {
	for _, tc := range []struct {
		passive, active, want FlowControl
	}{
		{FlowRDMA, FlowRDMA, FlowRDMA},
		{FlowNIC, FlowNIC, FlowNIC},
		{FlowTransport, FlowTransport, FlowTransport},
		{FlowTransport, FlowRDMA, FlowCredit},
		{FlowNIC, FlowCredit, FlowCredit},
		{FlowCredit, FlowTransport, FlowCredit},
	} {
		t.Run(fmt.Sprintf("%v-%v", tc.passive, tc.active), func(t *testing.T) {
			pc, ac := testConfig(), testConfig()
			pc.FlowControl, ac.FlowControl = tc.passive, tc.active
			a, p := connPairCfg(t, ac, pc)
			oneWay(t, p, a, 300<<10)
			require.Equal(t, tc.want.String(), a.Stats().FlowControl)
			require.Equal(t, tc.want.String(), p.Stats().FlowControl)
			closeBoth(t, a, p)
		})
	}
}

// TestOlderPeerHelloMeansCredit: a Hello whose byte 14 is 0, as peers
// without flow-control modes send, gets credit from a side that wants
// transport.
func TestOlderPeerHelloMeansCredit(t *testing.T) {
	h := Hello{Bufs: 16, IPVersion: 4, DesRemRcvSz: 65536, LocalRcvSz: 65536, FlowControl: FlowTransport}
	b := AppendHello(nil, &h)
	b[BSDHLen+14] = 0
	got, err := ParseHello(b)
	require.NoError(t, err)
	require.Equal(t, FlowCredit, got.FlowControl)
	ha := AppendHelloAck(nil, &HelloAck{Bufs: 16, IPVersion: 4, ActRcvSz: 65536, FlowControl: FlowRDMA, RingSTag: 0x1234, RingSize: 1 << 20})
	gotAck, err := ParseHelloAck(ha)
	require.NoError(t, err)
	require.Equal(t, FlowRDMA, gotAck.FlowControl)
	require.EqualValues(t, 0x1234, gotAck.RingSTag)
	require.EqualValues(t, 1<<20, gotAck.RingSize)
	_, err = ParseHelloAck(ha[:HelloAckLen]) // rdma without its ring
	require.Error(t, err)
}

// connPairCfg is connPair with a configuration per side.
func connPairCfg(t testing.TB, active, passive Config) (*Conn, *Conn) {
	t.Helper()
	cfd, afd := tcpPair(t)
	passive.Sanitize()
	req := writeRequest(t, afd, passive)
	p, err := NewPassive(afd, passive, req)
	require.NoError(t, err)
	a := NewActive(cfd, active, time.Now())
	closeAtCleanup(t, a, p)
	return a, p
}

// oneWay sends n bytes from s to r and checks them.
func oneWay(t *testing.T, s, r *Conn, n int) {
	data := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(data)
	until := time.Now().Add(20 * time.Second)
	done := make(chan error, 1)
	go func() { done <- sendMixed(t, s, data, rand.New(rand.NewSource(5)), until) }()
	got := make([]byte, 0, n)
	buf := make([]byte, 64<<10)
	for len(got) < n {
		k, err := r.Recv([][]byte{buf}, 0, time.Now())
		if err == ErrWouldBlock {
			require.NoError(t, wait(t, r, EvIn, until))
			continue
		}
		require.NoError(t, err)
		require.NotZero(t, k, "end of stream after %d bytes", len(got))
		got = append(got, buf[:k]...)
	}
	require.NoError(t, <-done)
	require.True(t, bytes.Equal(data, got))
}

// TestTransportAppendsToQueuedMessage: with transport flow control, small
// sends that find the previous message still queued (the socket is full) join
// it instead of becoming messages of their own (Balaji, Bhagvat, Thakur and
// Panda, "Sockets Direct Protocol for Hybrid Network Stacks: A Case Study
// with iWARP over 10G Ethernet", §4.2).
func TestTransportAppendsToQueuedMessage(t *testing.T) {
	cfg := testConfig()
	cfg.FlowControl = FlowTransport
	a, p := connPair(t, cfg)
	oneWay(t, p, a, 1)
	var sent []byte
	big := bytes.Repeat([]byte{7}, 16<<10)
	for i := 0; i < 10000 && p.Unsent() == 0; i++ { // fill the kernel until bytes queue here
		n, err := p.Send([][]byte{big}, time.Now())
		require.NoError(t, err)
		sent = append(sent, big[:n]...)
	}
	require.NotZero(t, p.Unsent(), "the socket filled up")
	msgs := p.Stats().MsgsTx
	for i := 0; i < 100; i++ {
		small := []byte(fmt.Sprintf("small send %03d;", i))
		n, err := p.Send([][]byte{small}, time.Now())
		require.NoError(t, err)
		require.Equal(t, len(small), n)
		sent = append(sent, small...)
	}
	st := p.Stats()
	require.GreaterOrEqual(t, st.CoalescedSends, uint64(90), "small sends appended to the queued message")
	require.LessOrEqual(t, st.MsgsTx-msgs, uint64(10), "100 small sends became few messages")
	until := time.Now().Add(20 * time.Second)
	go func() {
		for p.Unsent() > 0 && time.Now().Before(until) {
			_ = wait(t, p, EvOut, until)
		}
	}()
	got := readFor(t, a, len(sent), until)
	require.True(t, bytes.Equal(sent, got))
}

// TestSendMoreCorks: bytes sent with SendMore wait for the next send
// without it and go out in one message with it; a cork nobody ends goes
// out after corkMax.
func TestSendMoreCorks(t *testing.T) {
	for _, fc := range []FlowControl{FlowCredit, FlowRDMA, FlowNIC, FlowTransport} {
		t.Run(fc.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.FlowControl = fc
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			before := a.Stats().MsgsRx
			var want []byte
			for i := 0; i < 10; i++ {
				b := []byte(fmt.Sprintf("part %d;", i))
				n, err := p.SendFlags([][]byte{b}, SendMore, time.Now())
				require.NoError(t, err)
				require.Equal(t, len(b), n)
				want = append(want, b...)
			}
			require.Zero(t, a.Queued(), "nothing leaves while corked")
			n, err := p.Send([][]byte{[]byte("end")}, time.Now())
			require.NoError(t, err)
			require.Equal(t, 3, n)
			want = append(want, "end"...)
			got := readFor(t, a, len(want), time.Now().Add(10*time.Second))
			require.Equal(t, string(want), string(got))
			require.EqualValues(t, 1, a.Stats().MsgsRx-before, "one message carried the corked run")
			require.NotZero(t, p.Stats().CoalescedSends)

			n, err = p.SendFlags([][]byte{[]byte("lonely")}, SendMore, time.Now())
			require.NoError(t, err)
			require.Equal(t, 6, n)
			require.True(t, p.NeedsBackground(), "a cork is background work")
			go p.Background(time.Minute)
			got = readFor(t, a, 6, time.Now().Add(10*time.Second))
			require.Equal(t, "lonely", string(got), "the cork ran out")
		})
	}
}

// TestSendMoreSendsFullMessages: a corked run that fills whole messages sends them at once, as
// TCP sends the full segments of data held by MSG_MORE; only the tail waits for the run's end
// (a proxy writing 16 KiB pieces with MSG_MORE waited corkMax for every 256 KiB).
func TestSendMoreSendsFullMessages(t *testing.T) {
	for _, fc := range []FlowControl{FlowCredit, FlowRDMA, FlowNIC, FlowTransport} {
		t.Run(fc.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.FlowControl = fc
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			unit := cfg.BufSize - BSDHLen
			data := randBytes(3*unit+unit/2, 7)
			before := p.Stats().MsgsTx
			for off := 0; off < len(data); off += 16 << 10 {
				piece := data[off:min(off+16<<10, len(data))]
				n, err := p.SendFlags([][]byte{piece}, SendMore, time.Now())
				require.NoError(t, err)
				require.Equal(t, len(piece), n)
			}
			require.GreaterOrEqual(t, p.Stats().MsgsTx-before, uint64(3), "the full messages of the run left at once")
			n, err := p.Send([][]byte{[]byte("end")}, time.Now())
			require.NoError(t, err)
			require.Equal(t, 3, n)
			got := readFor(t, a, len(data)+3, time.Now().Add(10*time.Second))
			require.Equal(t, append(data, "end"...), got)
		})
	}
}

// TestCloseInEveryMode: half-close delivers everything and then end of
// stream while the other direction still works; closing with unread data
// resets the peer.
func TestCloseInEveryMode(t *testing.T) {
	for _, fc := range []FlowControl{FlowCredit, FlowRDMA, FlowNIC, FlowTransport} {
		for _, prog := range []Progress{ProgressInline, ProgressAsync} {
			t.Run(fc.String()+"/"+prog.String(), func(t *testing.T) {
				cfg := testConfig()
				cfg.FlowControl, cfg.Progress = fc, prog
				// The sender finishes before the receiver starts: a blocking
				// zero-copy send would wait for the peer's read, as SDP's
				// ZCopy does (TestZCopy), so only buffer copy here.
				cfg.ZCopyThreshold = 0
				a, p := connPair(t, cfg)
				oneWay(t, p, a, 1) // both ends up
				until := time.Now().Add(20 * time.Second)
				data := bytes.Repeat([]byte("half-close "), 50000)
				require.NoError(t, sendMixed(t, p, data, rand.New(rand.NewSource(1)), until))
				require.NoError(t, p.Shutdown(false, true, time.Now()))
				if p.NeedsBackground() {
					go p.Background(time.Minute)
				}
				got, err := recvAll(t, a, len(data), rand.New(rand.NewSource(2)), until)
				require.NoError(t, err, "end of stream after the data")
				require.True(t, bytes.Equal(data, got))
				_, err = p.Send([][]byte{[]byte("x")}, time.Now())
				require.ErrorIs(t, err, unix.EPIPE, "writing after shutdown")
				oneWay(t, a, p, 100<<10) // the other direction still works

				// A side that closes with data unread resets its peer.
				a, p = connPair(t, cfg)
				oneWay(t, p, a, 1)
				_, err = a.Send([][]byte{[]byte("unread by the peer")}, time.Now())
				require.NoError(t, err)
				for i := 0; i < 1000 && p.Queued() == 0; i++ {
					require.NoError(t, wait(t, p, EvIn, until))
				}
				require.NotZero(t, p.Queued())
				p.Close(time.Now())
				for {
					_, err = a.Recv([][]byte{make([]byte, 16)}, 0, time.Now())
					if err != ErrWouldBlock {
						break
					}
					require.NoError(t, wait(t, a, EvIn, until))
				}
				require.ErrorIs(t, err, unix.ECONNRESET)
			})
		}
	}
}

// TestUnexpectedMessageAborts: a message the connection's state does not
// allow (here ModeChange, which libsdp never negotiates, and a
// RdmaRdCompl for an offer never made) ends the connection with EIO and an
// error that names it; the peer is told by AbortConn.
func TestUnexpectedMessageAborts(t *testing.T) {
	for _, mid := range []MID{MIDModeChange, MIDRdmaRdCompl, MIDSinkAvail} {
		t.Run(mid.String(), func(t *testing.T) {
			a, p := connPair(t, testConfig())
			oneWay(t, p, a, 1)
			p.mu.Lock()
			p.sendControl(mid) // white box: a peer that sends it
			_ = p.flush()
			p.mu.Unlock()
			until := time.Now().Add(10 * time.Second)
			var err error
			for {
				_, err = a.Recv([][]byte{make([]byte, 16)}, 0, time.Now())
				if err != ErrWouldBlock {
					break
				}
				require.NoError(t, wait(t, a, EvIn, until))
			}
			require.ErrorIs(t, err, unix.EIO)
			require.Contains(t, a.Err().Error(), mid.String())
			// AbortConn reaches the sender, which ends with ECONNRESET.
			for {
				_, err = p.Recv([][]byte{make([]byte, 16)}, 0, time.Now())
				if err != ErrWouldBlock {
					break
				}
				require.NoError(t, wait(t, p, EvIn, until))
			}
			require.ErrorIs(t, err, unix.ECONNRESET)
		})
	}
}

// TestAbort: close with SO_LINGER {1, 0} sends AbortConn; the peer sees
// ECONNRESET even with data of its own still unread by us.
func TestAbort(t *testing.T) {
	for _, fc := range []FlowControl{FlowCredit, FlowRDMA, FlowTransport} {
		t.Run(fc.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.FlowControl = fc
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			_, err := a.Send([][]byte{[]byte("never read")}, time.Now())
			require.NoError(t, err)
			a.Abort(time.Now())
			until := time.Now().Add(10 * time.Second)
			for i := 0; i < 1000; i++ {
				var n int
				n, err = p.Recv([][]byte{make([]byte, 64)}, 0, time.Now())
				if err == ErrWouldBlock {
					require.NoError(t, wait(t, p, EvIn, until))
					continue
				}
				if err != nil || n == 0 {
					break // n > 0: the bytes sent before the abort
				}
			}
			require.ErrorIs(t, err, unix.ECONNRESET)
			_, err = p.Send([][]byte{[]byte("x")}, time.Now())
			require.ErrorIs(t, err, unix.ECONNRESET)
		})
	}
}

// TestRecvStalled: a receiver that reads nothing reports RecvStalled once
// its peer has no room left to send into (credits, the ring, or the most
// the engine holds), in every flow control, so that the shim's SO_RCVLOWAT
// gives way there instead of waiting for bytes that cannot come; once the
// application has read everything, it no longer does.
func TestRecvStalled(t *testing.T) {
	for fc := FlowCredit; fc < numFlowControls; fc++ {
		t.Run(fc.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.FlowControl = fc
			cfg.RecvBufs, cfg.BufSize = 4, 4096
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1) // both ends up
			require.False(t, a.RecvStalled())
			until := time.Now().Add(20 * time.Second)
			msg := make([]byte, 100)
			for !a.RecvStalled() {
				require.True(t, time.Now().Before(until), "not stalled with %d bytes queued", a.Queued())
				_, err := p.Send([][]byte{msg}, time.Now())
				if err != nil && err != ErrWouldBlock {
					require.NoError(t, err)
				}
			}
			require.NotZero(t, a.Queued())
			t.Logf("stalled with %d bytes queued", a.Queued())
			buf := make([]byte, 64<<10)
			for quiet := 0; quiet < 20; {
				require.True(t, time.Now().Before(until))
				_, _, _, _ = p.Poll(EvOut, time.Now()) // held bytes may go now
				k, err := a.Recv([][]byte{buf}, 0, time.Now())
				if err == ErrWouldBlock {
					quiet++
					time.Sleep(5 * time.Millisecond)
					continue
				}
				require.NoError(t, err)
				require.NotZero(t, k)
				quiet = 0
			}
			require.False(t, a.RecvStalled())
		})
	}
}
