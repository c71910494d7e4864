package sdpcore

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"libsdp/internal/testnet"
)

// BenchmarkStream measures one-way throughput of an SDP connection over
// loopback TCP (both ends in this process, the receiver in a goroutine)
// beside plain TCP moving the same bytes with the same call sizes.
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		b.Run("sdp/"+sizeName(size), func(b *testing.B) { benchSDP(b, size, DefaultConfig()) })
		b.Run("sdp-nomarkers-nocrc/"+sizeName(size), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Markers, cfg.CRC = false, false
			benchSDP(b, size, cfg)
		})
		b.Run("sdp-zcopy/"+sizeName(size), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.ZCopyThreshold = testZCopyThreshold // off by default: measured beside it
			benchSDP(b, size, cfg)
		})
		b.Run("sdp-aligned/"+sizeName(size), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Unaligned, cfg.AlignLocal = false, true // SDP_FPDU_ALIGN=on
			benchSDP(b, size, cfg)
		})
		b.Run("tcp/"+sizeName(size), func(b *testing.B) { benchTCP(b, size) })
	}
}

// BenchmarkModes measures one-way throughput of every flow control,
// buffering and progress mode (markers and CRC on, the defaults) beside
// plain TCP with the same call sizes, in one run:
//
//	go test -run '^$' -bench BenchmarkModes ./sdpcore
func BenchmarkModes(b *testing.B) {
	for _, size := range []int{256, 4 << 10, 64 << 10} {
		for fc := FlowCredit; fc < numFlowControls; fc++ {
			for _, buf := range []Buffering{BufIntegrated, BufSeparate} {
				for _, prog := range []Progress{ProgressInline, ProgressAsync} {
					cfg := DefaultConfig()
					cfg.FlowControl, cfg.Buffering, cfg.Progress = fc, buf, prog
					name := fc.String() + "-" + buf.String() + "-" + prog.String() + "/" + sizeName(size)
					b.Run(name, func(b *testing.B) { benchSDP(b, size, cfg) })
				}
			}
		}
		b.Run("tcp/"+sizeName(size), func(b *testing.B) { benchTCP(b, size) })
	}
}

func sizeName(n int) string {
	if n < 1<<10 {
		return itoa(n) + "B"
	}
	if n >= 1<<20 {
		return itoa(n>>20) + "MiB"
	}
	return itoa(n>>10) + "KiB"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func benchSDP(b *testing.B, size int, cfg Config) {
	benchOneWay(b, cfg, size, 0, 256<<10, 0)
}

// benchOneWay measures b.N sends of size bytes with sendFlags from one end
// of a pair to the other, whose receiver reads them in calls of at most
// chunk bytes with recvFlags. It reports the payload copies per byte each
// way and returns both ends' counters (the sender's first).
func benchOneWay(b *testing.B, cfg Config, size int, sendFlags SendFlags, chunk int, recvFlags RecvFlags) (tx, rx Stats) {
	a, p := connPair(b, cfg)
	return benchOneWayOn(b, a, p, size, sendFlags, chunk, recvFlags)
}

// benchOneWayOn is benchOneWay over a pair made already (a active, p passive).
func benchOneWayOn(b *testing.B, a, p *Conn, size int, sendFlags SendFlags, chunk int, recvFlags RecvFlags) (tx, rx Stats) {
	buf := make([]byte, size)
	done := make(chan error, 1)
	until := time.Now().Add(5 * time.Minute)
	go func() {
		// As in the bandwidth test of Balaji et al., "Analyzing the Impact of
		// Supporting Out-of-Order Communication on In-order Performance with
		// iWARP" (§IV-B.1), the receiver answers with one byte once it has
		// everything; the sender waits for it.
		err := recvCountFlags(b, a, make([]byte, chunk), size*b.N, recvFlags, until)
		if err == nil {
			err = sendBytes(b, a, []byte{1}, 0, until)
		}
		done <- err
	}()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := sendBytes(b, p, buf, sendFlags, until); err != nil {
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
	tx, rx = p.Stats(), a.Stats()
	if tx.PayloadTx > 0 && rx.PayloadRx > 0 {
		b.ReportMetric(float64(tx.UserCopiesTx)/float64(tx.PayloadTx), "copies/B-tx")
		b.ReportMetric(float64(rx.UserCopiesRx)/float64(rx.PayloadRx), "copies/B-rx")
	}
	return tx, rx
}

// sendBytes sends all of data with flags, waiting (bounded) while the
// connection takes nothing, and starts the background flush as the engine
// does after every send.
func sendBytes(tb testing.TB, c *Conn, data []byte, flags SendFlags, until time.Time) error {
	for len(data) > 0 {
		// The zero time, "now, if needed", as the preload passes (sdpcore/clock.go).
		n, err := c.SendFlags([][]byte{data}, flags, time.Time{})
		if c.NeedsBackground() {
			go c.Background(time.Minute)
		}
		if err == ErrWouldBlock {
			if err := wait(tb, c, EvOut, until); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// recvCount receives n bytes into buf, over and over, waiting (bounded)
// while none are there.
func recvCount(tb testing.TB, c *Conn, buf []byte, n int, until time.Time) error {
	return recvCountFlags(tb, c, buf, n, 0, until)
}

// recvCountFlags is recvCount with receive flags (RecvWait: as a blocking
// recv(2)).
func recvCountFlags(tb testing.TB, c *Conn, buf []byte, n int, flags RecvFlags, until time.Time) error {
	for got := 0; got < n; {
		k, err := recvWait(tb, c, buf[:min(len(buf), n-got)], flags, until)
		if err != nil {
			return err
		}
		if k == 0 {
			return fmt.Errorf("end of stream after %d of %d bytes", got, n)
		}
		got += k
	}
	return nil
}

func benchTCP(b *testing.B, size int) {
	c, s := tcpPairB(b)
	buf := make([]byte, size)
	total := size * b.N
	done := make(chan error, 1)
	go func() {
		rb := make([]byte, 256<<10)
		got := 0
		for got < total {
			n, err := unix.Read(s, rb)
			if err != nil || n == 0 {
				done <- err
				return
			}
			got += n
		}
		_, err := unix.Write(s, []byte{1})
		done <- err
	}()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for off := 0; off < size; {
			n, err := unix.Write(c, buf[off:])
			if err != nil {
				b.Fatal(err)
			}
			off += n
		}
	}
	if n, err := unix.Read(c, make([]byte, 1)); err != nil || n != 1 {
		b.Fatal("no answer from the receiver:", err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

func tcpPairB(b *testing.B) (int, int) { return tcpPair(b) }

// BenchmarkProgress is the communication-progress test of Balaji, Bhagvat,
// Panda, Thakur and Gropp, "Advanced Flow-control Mechanisms for the Sockets
// Direct Protocol over InfiniBand" (§5.2.2, Fig. 5): each round the sender
// sends a burst of 100 messages of 4 KiB into a 64 KiB receive ring (or 4
// credits of 16 KiB), then computes for 1 ms without calling the library,
// then waits for the receiver's one-byte answer, which the receiver sends
// once it has the whole burst. A mode that moves held data while the sender
// computes overlaps the two; rdma with inline progress cannot (ns/op is the
// time of one round).
func BenchmarkProgress(b *testing.B) {
	for _, m := range []struct {
		fc   FlowControl
		prog Progress
	}{
		{FlowCredit, ProgressInline}, {FlowRDMA, ProgressInline}, {FlowNIC, ProgressInline},
		{FlowRDMA, ProgressAsync}, {FlowTransport, ProgressInline},
	} {
		b.Run(m.fc.String()+"-"+m.prog.String(), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.FlowControl, cfg.Progress = m.fc, m.prog
			cfg.BufSize, cfg.RecvBufs = 16<<10, 4
			benchProgress(b, cfg, time.Millisecond)
		})
	}
}

func benchProgress(b *testing.B, cfg Config, compute time.Duration) {
	const msg, burst = 4 << 10, 100
	a, p := connPair(b, cfg)
	until := time.Now().Add(5 * time.Minute)
	buf := make([]byte, msg)
	done := make(chan error, 1)
	go func() {
		rb := make([]byte, 64<<10)
		for i := 0; i < b.N; i++ {
			if err := recvCount(b, a, rb, msg*burst, until); err != nil {
				done <- err
				return
			}
			if err := sendBytes(b, a, []byte{1}, 0, until); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	ack := make([]byte, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < burst; k++ {
			if err := sendBytes(b, p, buf, 0, until); err != nil {
				b.Fatal(err)
			}
		}
		for end := time.Now().Add(compute); time.Now().Before(end); { // computing: no call
		}
		if err := recvCount(b, p, ack, 1, until); err != nil {
			b.Fatal("no answer:", err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPushFlush measures a ping-pong of large messages, each side
// sending size bytes once it has received the other's, as NetPIPE does:
// every pass over the data is on the critical path, so a sender that
// writes what it has framed while it frames the rest lets the receiver
// start early. It compares the default (write every pushFlush octets)
// with writing at half the backlog, beside plain TCP, over segments of
// 1448 octets (a 1500-octet MTU, FPDUs aligned as between hosts) and of
// loopback's size. ns/op is one round trip.
//
//	go test -run '^$' -bench BenchmarkPushFlush ./sdpcore
func BenchmarkPushFlush(b *testing.B) {
	def := pushFlush
	for _, mss := range []int{1448, 0} {
		net := "mss1448"
		if mss == 0 {
			net = "loopback"
		}
		for _, size := range []int{128 << 10, 1 << 20} {
			for _, m := range []struct {
				name  string
				flush int
			}{{"sdp-64KiB", def}, {"sdp-halfbacklog", DefaultConfig().TxBacklog / 2}} {
				b.Run(net+"/"+m.name+"/"+sizeName(size), func(b *testing.B) {
					pushFlush = m.flush
					defer func() { pushFlush = def }()
					cfg := DefaultConfig()
					cfg.Unaligned, cfg.AlignLocal = false, true // aligned (SDP_FPDU_ALIGN=on)
					cfg.SameHost = false
					cfd, afd := testnet.TCPPairMSS(b, mss)
					a, p := connPairOn(b, cfg, cfd, afd)
					b.SetBytes(int64(2 * size))
					benchPingPong(b, a, p, size)
				})
			}
			b.Run(net+"/tcp/"+sizeName(size), func(b *testing.B) {
				cfd, afd := testnet.TCPPairMSS(b, mss)
				b.SetBytes(int64(2 * size))
				benchPingPongTCPOn(b, cfd, afd, size)
			})
		}
	}
}

// BenchmarkSmallExchange measures what a small message costs the CPU, the
// engine's part of a ping-pong's latency: one goroutine sends size bytes
// from one end, receives them at the other, sends them back and receives
// them there (loopback TCP delivers within the send, so no call waits),
// beside plain TCP making the same calls. ns/op is one exchange: two sends
// and two receives, the kernel's work included.
//
//	go test -run '^$' -bench BenchmarkSmallExchange -cpuprofile cpu.out ./sdpcore
func BenchmarkSmallExchange(b *testing.B) {
	for _, size := range []int{1, 64, 1024} {
		b.Run("sdp/"+sizeName(size), func(b *testing.B) {
			a, p := connPair(b, DefaultConfig())
			until := time.Now().Add(5 * time.Minute)
			benchExchange(b, size, func(buf []byte) error {
				for _, ends := range [][2]*Conn{{a, p}, {p, a}} {
					if err := sendBytes(b, ends[0], buf, 0, until); err != nil {
						return err
					}
					if err := recvCount(b, ends[1], buf, len(buf), until); err != nil {
						return err
					}
				}
				return nil
			})
		})
		b.Run("tcp/"+sizeName(size), func(b *testing.B) {
			c, s := tcpPairB(b)
			benchExchange(b, size, func(buf []byte) error {
				for _, fds := range [][2]int{{c, s}, {s, c}} {
					if _, err := unix.Write(fds[0], buf); err != nil {
						return err
					}
					for got := 0; got < len(buf); {
						n, err := unix.Read(fds[1], buf[got:])
						if err != nil || n == 0 {
							return fmt.Errorf("read: %d, %v", n, err)
						}
						got += n
					}
				}
				return nil
			})
		})
	}
}

func benchExchange(b *testing.B, size int, exchange func([]byte) error) {
	buf := make([]byte, size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := exchange(buf); err != nil {
			b.Fatal(err)
		}
	}
}
