package sdpcore

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
		k, err := c.Recv([][]byte{buf[:min(chunk, n-len(got))]}, flags, time.Now())
		if err == ErrWouldBlock {
			if err := wait(t, c, EvIn, until); err != nil {
				return got, err
			}
			continue
		}
		if err != nil {
			return got, err
		}
		require.NotZero(t, k)
		got = append(got, buf[:k]...)
	}
	return got, nil
}

// TestZCopy: a large blocking send is offered by SrcAvail and RDMA-Read
// straight into the receiver's buffers; a receiver that does not wait gets
// the rest by buffer copy (SendSM); two peers that both send before they
// read get through by SrcAvailCancel.
func TestZCopy(t *testing.T) {
	const total = 1 << 20
	data := make([]byte, total)
	rand.New(rand.NewSource(11)).Read(data)
	// rdma is left out: its held bytes wait for the sender's next call,
	// and these senders make none once all is taken (TestStalledProgress).
	for _, fc := range []FlowControl{FlowCredit, FlowNIC, FlowTransport} {
		t.Run(fc.String()+"/read", func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.FlowControl = fc
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			until := time.Now().Add(30 * time.Second)
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
			// Normally all of it; a slow machine may see the offer
			// cancelled after the first read (zcopyCancel).
			require.GreaterOrEqual(t, ps.ZCopyTx, uint64(256<<10))
			require.Equal(t, ps.ZCopyTx, as.ZCopyRx)
			// The Read Responses went out of the sender's buffer itself.
			require.Equal(t, uint64(total)-ps.ZCopyTx, ps.UserCopiesTx-ps0.UserCopiesTx, "copies on the sending side")
			// At most one copy per byte: iwarp's staging copy when the data
			// was all in before placement could start, none when it read it
			// from the socket straight into the application's buffer.
			copies, direct := as.UserCopiesRx-as0.UserCopiesRx, as.DirectPlacedRx-as0.DirectPlacedRx
			if fc != FlowNIC { // ring bytes may cost two copies
				require.LessOrEqual(t, copies, uint64(total))
			}
			require.GreaterOrEqual(t, copies+direct, uint64(total))
		})
		t.Run(fc.String()+"/sendsm", func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.FlowControl = fc
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			until := time.Now().Add(30 * time.Second)
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
			cfg := DefaultConfig()
			cfg.FlowControl = fc
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			until := time.Now().Add(30 * time.Second)
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
			cfg := DefaultConfig()
			cfg.FlowControl = fc
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			until := time.Now().Add(30 * time.Second)
			data := make([]byte, total)
			rand.New(rand.NewSource(12)).Read(data)
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
			cfg := DefaultConfig()
			cfg.Markers, cfg.CRC = markers, markers
			benchZCopy(b, size, cfg)
		})
		b.Run("bcopy"+suffix, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Markers, cfg.CRC = markers, markers
			cfg.ZCopyThreshold = 0
			benchZCopy(b, size, cfg)
		})
	}
	b.Run("tcp", func(b *testing.B) { benchTCP(b, size) })
}

func benchZCopy(b *testing.B, size int, cfg Config) {
	a, p := connPair(b, cfg)
	buf := make([]byte, size)
	done := make(chan error, 1)
	until := time.Now().Add(5 * time.Minute)
	go func() {
		rb := make([]byte, size)
		total := size * b.N
		for got := 0; got < total; {
			k, err := a.Recv([][]byte{rb[:min(size, total-got)]}, RecvWait, time.Now())
			if err == ErrWouldBlock {
				if err := wait(b, a, EvIn, until); err != nil {
					done <- err
					return
				}
				continue
			}
			if err != nil {
				done <- err
				return
			}
			got += k
		}
		done <- sendBytes(b, a, []byte{1}, 0, until)
	}()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := sendBytes(b, p, buf, SendWait, until); err != nil {
			b.Fatal(err)
		}
	}
	if err := recvCount(b, p, make([]byte, 1), 1, until); err != nil {
		b.Fatal("no answer from the receiver:", err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	tx, rx := p.Stats(), a.Stats()
	if tx.PayloadTx > 0 && rx.PayloadRx > 0 {
		b.ReportMetric(float64(tx.UserCopiesTx)/float64(tx.PayloadTx), "copies/B-tx")
		b.ReportMetric(float64(rx.UserCopiesRx)/float64(rx.PayloadRx), "copies/B-rx")
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
			cfg := DefaultConfig()
			cfg.FlowControl = fc
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			until := time.Now().Add(30 * time.Second)
			data := make([]byte, total)
			rand.New(rand.NewSource(13)).Read(data)
			done := make(chan error, 1)
			go func() { done <- sendWait(t, p, data, until) }()
			for { // the offer is in
				_, _, _, err := a.Poll(EvIn, time.Now())
				require.NoError(t, err)
				a.mu.Lock()
				offered := a.zsink != nil
				a.mu.Unlock()
				if offered {
					break
				}
				require.NoError(t, wait(t, a, EvIn, until))
			}
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
