package sdpcore

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// sendWait sends all of data with SendWait, as a blocking send(2) would.
func sendWait(t *testing.T, c *Conn, data []byte, until time.Time) error {
	return sendBytes(t, c, data, SendWait, until)
}

// recvN receives n bytes in calls of at most chunk bytes with flags.
func recvN(t *testing.T, c *Conn, n, chunk int, flags RecvFlags, until time.Time) ([]byte, error) {
	got := make([]byte, 0, n)
	buf := make([]byte, chunk)
	for len(got) < n {
		k, err := recvWait(t, c, buf[:min(chunk, n-len(got))], flags, until)
		if err != nil {
			return got, err
		}
		require.NotZero(t, k, "end of stream after %d bytes", len(got))
		got = append(got, buf[:k]...)
	}
	return got, nil
}

// zcopyPair connects a pair in flow-control mode fc, moves one byte from
// p to a and returns them with a deadline 30 s away.
func zcopyPair(t *testing.T, fc FlowControl) (a, p *Conn, until time.Time) {
	t.Helper()
	return zcopyPairWait(t, fc, 0)
}

// zcopyPairPatient is zcopyPair whose offers wait 30 s for the first read
// instead of 20 ms: for tests whose reader is a blocking call that comes
// (the cancel is for one that does not), which a loaded machine may keep
// off the CPU longer than 20 ms.
func zcopyPairPatient(t *testing.T, fc FlowControl) (a, p *Conn, until time.Time) {
	t.Helper()
	return zcopyPairWait(t, fc, 30*time.Second)
}

func zcopyPairWait(t *testing.T, fc FlowControl, cancel time.Duration) (a, p *Conn, until time.Time) {
	t.Helper()
	cfg := testConfig()
	cfg.FlowControl = fc
	cfg.ZCopyCancel = cancel
	a, p = connPair(t, cfg)
	oneWay(t, p, a, 1)
	return a, p, time.Now().Add(30 * time.Second)
}

// driveUntil runs c's side of the protocol until held, called with c.mu
// held, reports true; it fails the test with msg at until.
func driveUntil(t *testing.T, c *Conn, held func() bool, until time.Time, msg string) {
	t.Helper()
	for {
		_, _, _, err := c.Poll(EvIn, time.Now())
		require.NoError(t, err)
		c.mu.Lock()
		ok := held()
		c.mu.Unlock()
		if ok {
			return
		}
		require.True(t, time.Now().Before(until), msg)
		pfd := []unix.PollFd{{Fd: int32(c.Fd()), Events: unix.POLLIN}}
		_, _ = unix.Poll(pfd, 100)
	}
}

// TestZCopy: a large blocking send is offered by SrcAvail and RDMA-Read
// straight into the receiver's buffers; a receiver that does not wait gets
// the rest by buffer copy (SendSM); two peers that both send before they
// read get through by SrcAvailCancel.
func TestZCopy(t *testing.T) {
	const total = 1 << 20
	data := randBytes(total, 11)
	// rdma is left out: its held bytes wait for the sender's next call,
	// and these senders make none once all is taken (TestStalledProgress).
	for _, fc := range []FlowControl{FlowCredit, FlowNIC, FlowTransport} {
		t.Run(fc.String()+"/read", func(t *testing.T) {
			a, p, until := zcopyPairPatient(t, fc)
			as0, ps0 := a.Stats(), p.Stats()
			done := make(chan error, 1)
			go func() { done <- sendWait(t, p, data, until) }()
			got, err := recvN(t, a, total, 256<<10, RecvWait, until)
			require.NoError(t, err)
			require.NoError(t, <-done)
			require.True(t, bytes.Equal(data, got))
			ps, as := p.Stats(), a.Stats()
			// One SrcAvail, unless the receiver's first call came first and
			// offered its buffer by SinkAvail (Write ZCopy).
			require.NotZero(t, ps.ZCopyReadSends+ps.ZCopyWriteSends)
			// An offer waits for the reader's calls (zcopyPairPatient): at
			// least its first read went by zero copy, normally all of it.
			require.GreaterOrEqual(t, ps.ZCopyTx, uint64(256<<10))
			require.Equal(t, ps.ZCopyTx, as.ZCopyRx)
			// The Read Responses went out of the sender's buffer itself,
			// except what the kernel had not taken yet when the offer was
			// answered (a busy machine): iwarp copies those octets before
			// the region goes (TxCopied), at most once each.
			sent := ps.UserCopiesTx - ps0.UserCopiesTx
			require.GreaterOrEqual(t, sent, uint64(total)-ps.ZCopyTx, "copies on the sending side")
			require.LessOrEqual(t, sent, uint64(total), "copies on the sending side: at most one per byte")
			// At most one copy per byte: iwarp's staging copy when the data
			// was all in before placement could start, none when it read it
			// from the socket straight into the application's buffer.
			copies, direct := as.UserCopiesRx-as0.UserCopiesRx, as.DirectPlacedRx-as0.DirectPlacedRx
			if fc != FlowNIC { // ring bytes may cost two copies
				require.LessOrEqual(t, copies, uint64(total))
			}
			require.GreaterOrEqual(t, copies+direct, uint64(total))
		})
		t.Run(fc.String()+"/small-reads", func(t *testing.T) {
			// A blocking sender of 2 MiB and a blocking reader of 64 KiB at
			// a time: one RDMA Read and one RdmaRdCompl per call, 32 in
			// all, twice the sender's receive buffers, while the sender
			// only waits. It must return the buffers those messages used
			// (it stalled at 17 reads when only data counted).
			// A busy machine may see the offer cancelled early (the
			// reader's call came late) and the rest sent by copy: each
			// try must deliver every byte, and one of at most five must
			// read more pieces than the sender has buffers.
			data := randBytes(2<<20, 12)
			var most uint64
			for try := 0; try < 5 && most <= 16*64<<10; try++ {
				a, p, until := zcopyPair(t, fc)
				done := make(chan error, 1)
				go func() { done <- sendWait(t, p, data, until) }()
				got, err := recvN(t, a, len(data), 64<<10, RecvWait, until)
				require.NoError(t, err, "after %d bytes\nactive:  %v\npassive: %v", len(got), a, p)
				require.NoError(t, <-done)
				require.Equal(t, -1, firstDiff(data, got))
				most = max(most, p.Stats().ZCopyTx)
			}
			require.Greater(t, most, uint64(16*64<<10), "more pieces read than the sender has buffers")
		})
		t.Run(fc.String()+"/sendsm", func(t *testing.T) {
			a, p, until := zcopyPairPatient(t, fc)
			done := make(chan error, 1)
			go func() { done <- sendWait(t, p, data, until) }()
			head, err := recvN(t, a, 100<<10, 100<<10, RecvWait, until) // read by RDMA Read
			require.NoError(t, err)
			rest, err := recvN(t, a, total-len(head), 64<<10, 0, until) // does not wait: SendSM
			require.NoError(t, err, "after %d bytes\nactive:  %v\npassive: %v", len(rest), a, p)
			require.NoError(t, <-done)
			require.True(t, bytes.Equal(data, append(head, rest...)))
			ps := p.Stats()
			require.EqualValues(t, 100<<10, ps.ZCopyTx)
			require.EqualValues(t, total+1, ps.PayloadTx) // and the byte of oneWay
		})
		t.Run(fc.String()+"/both-send-first", func(t *testing.T) {
			a, p, until := zcopyPair(t, fc)
			// Each sends less than buffer copy can hold unread, as a TCP
			// program that does this relies on the socket buffers.
			data := data[:256<<10]
			total := len(data)
			errs := make(chan error, 2)
			var gotA, gotP []byte
			go func() {
				err := sendWait(t, a, data, until)
				if err == nil {
					gotA, err = recvN(t, a, total, 64<<10, RecvWait, until)
				}
				errs <- err
			}()
			go func() {
				err := sendWait(t, p, data, until)
				if err == nil {
					gotP, err = recvN(t, p, total, 64<<10, RecvWait, until)
				}
				errs <- err
			}()
			require.NoError(t, <-errs)
			require.NoError(t, <-errs)
			require.Equal(t, len(data), len(gotA))
			require.Equal(t, len(data), len(gotP))
			require.Equal(t, -1, firstDiff(data, gotA), "active side\nactive:  %v\npassive: %v", a, p)
			require.Equal(t, -1, firstDiff(data, gotP), "passive side")
			require.NotZero(t, a.Stats().ZCopyCancels+p.Stats().ZCopyCancels)
		})
	}
}

// firstDiff returns the first offset where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestZCopyCancelSend: a send call whose offer the sink has not answered
// ends early (a signal: CancelSend). The offer counts as taken, the
// application's buffer is never read again (the test overwrites it), and
// the connection finishes the transfer by itself from its own copy, before
// what is sent later.
func TestZCopyCancelSend(t *testing.T) {
	const total = 1 << 20
	for _, fc := range []FlowControl{FlowCredit, FlowNIC, FlowTransport} {
		t.Run(fc.String(), func(t *testing.T) {
			a, p, until := zcopyPair(t, fc)
			data := randBytes(total, 12)
			want := append([]byte(nil), data...)
			n, err := p.SendFlags([][]byte{data}, SendWait, time.Now())
			require.Equal(t, ErrWouldBlock, err, "the offer is out (%d)", n)
			require.EqualValues(t, 1, p.Stats().ZCopyReadSends)
			require.Equal(t, total, p.CancelSend(data), "the whole offer is taken")
			require.True(t, p.NeedsBackground(), "the connection finishes the offer by itself")
			go p.Background(time.Minute)
			for i := range data {
				data[i] = 0xEE
			}
			tail := []byte("after")
			done := make(chan error, 1)
			go func() { done <- sendBytes(t, p, tail, 0, until) }()
			got, err := recvN(t, a, total+len(tail), 256<<10, RecvWait, until)
			require.NoError(t, err)
			require.NoError(t, <-done)
			require.Equal(t, -1, firstDiff(append(want, tail...), got))
		})
	}
}

// BenchmarkZCopy measures one-way throughput of 1 MiB blocking sends into
// 1 MiB blocking receives: by zero copy (Read ZCopy or Write ZCopy,
// whichever offer comes first), by buffer copy alone (threshold 0), and
// over plain TCP with the same call sizes, in one run:
//
//	go test -run '^$' -bench BenchmarkZCopy ./sdpcore
func BenchmarkZCopy(b *testing.B) {
	const size = 1 << 20
	for _, markers := range []bool{true, false} {
		suffix := ""
		if !markers {
			suffix = "-nomarkers-nocrc"
		}
		b.Run("zcopy"+suffix, func(b *testing.B) {
			cfg := testConfig()
			cfg.Markers, cfg.CRC = markers, markers
			benchZCopy(b, size, cfg)
		})
		b.Run("bcopy"+suffix, func(b *testing.B) {
			cfg := testConfig()
			cfg.Markers, cfg.CRC = markers, markers
			cfg.ZCopyThreshold = 0
			benchZCopy(b, size, cfg)
		})
	}
	b.Run("tcp", func(b *testing.B) { benchTCP(b, size) })
}

func benchZCopy(b *testing.B, size int, cfg Config) {
	tx, rx := benchOneWay(b, cfg, size, SendWait, size, RecvWait)
	if tx.PayloadTx > 0 && rx.PayloadRx > 0 {
		b.ReportMetric(float64(tx.ZCopyTx-rx.ZCopyWriteRx)/float64(tx.PayloadTx), "read-zcopy/B")
		b.ReportMetric(float64(rx.ZCopyWriteRx)/float64(tx.PayloadTx), "write-zcopy/B")
	}
}

// TestZCopyCancelRead: a receive call whose RDMA Read of the peer's offer
// is in flight ends early (a signal: CancelRecv). Its buffer is never
// written again (the test fills it after the call), and the bytes the
// Read brings are read as data by the next call, in order.
func TestZCopyCancelRead(t *testing.T) {
	const total = 1 << 20
	for _, fc := range []FlowControl{FlowCredit, FlowNIC, FlowTransport} {
		t.Run(fc.String(), func(t *testing.T) {
			a, p, until := zcopyPair(t, fc)
			data := randBytes(total, 13)
			done := make(chan error, 1)
			go func() { done <- sendWait(t, p, data, until) }()
			driveUntil(t, a, func() bool { return a.zsink != nil }, until, "the SrcAvail never came")
			buf := make([]byte, 256<<10)
			_, err := a.Recv([][]byte{buf}, RecvWait, time.Now())
			require.Equal(t, ErrWouldBlock, err, "the Read Request is out")
			require.Zero(t, a.CancelRecv(buf), "nothing read yet when the call ended")
			for i := range buf {
				buf[i] = 0xEE
			}
			got, err := recvN(t, a, total, 64<<10, 0, until)
			require.NoError(t, err)
			require.NoError(t, <-done)
			require.Equal(t, -1, firstDiff(data, got))
			for i, b := range buf {
				require.Equal(t, byte(0xEE), b, "the cancelled buffer was written at %d", i)
			}
			require.GreaterOrEqual(t, a.Stats().ZCopyRx, uint64(256<<10), "the Read completed into our copy")
		})
	}
}
