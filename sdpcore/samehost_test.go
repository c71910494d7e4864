package sdpcore

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"libsdp/iwarp"
	"libsdp/shm"
)

// shmRing is the ring size of the tests' regions: small, so that full
// rings and wraps happen often.
const shmRing = 64 << 10

// shmPair is connPair with the messages over a shared-memory stream: the
// accepting side makes the region, the connecting side maps it (in one
// process here; the rendezvous that passes it between processes is
// shm's). It returns the streams too, and the sockets (connecting first).
func shmPair(t testing.TB, cfg Config) (a, p *Conn, as, ps *shm.Stream, cfd, afd int) {
	return shmPairRing(t, cfg, shmRing)
}

// shmPairRing is shmPair with rings of the given size.
func shmPairRing(t testing.TB, cfg Config, ring int) (a, p *Conn, as, ps *shm.Stream, cfd, afd int) {
	t.Helper()
	cfd, afd = tcpPair(t)
	r, err := shm.Create(ring)
	require.NoError(t, err)
	peer, err := shm.Open(r.Fd(), ring)
	require.NoError(t, err)
	require.NoError(t, r.CloseFd())
	// Registered before the connections' cleanup, so run after it: a
	// region must outlive every use of its rings.
	t.Cleanup(func() { r.Close(); peer.Close() })
	ps, err = shm.NewStream(r, true, afd)
	require.NoError(t, err)
	as, err = shm.NewStream(peer, false, cfd)
	require.NoError(t, err)
	a, p = connPairStream(t, cfg, cfd, afd, as, ps)
	return a, p, as, ps, cfd, afd
}

// kernelBytes is what the kernel carried over the socket, both ways.
func kernelBytes(t testing.TB, fd int) uint64 {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	require.NoError(t, err)
	return info.Bytes_acked + info.Bytes_received
}

// TestSharedMemoryModes: every flow control, buffering and progress mode
// moves its bytes both ways over the shared-memory stream, with zero copy
// where the sizes call for it; the TCP socket carries only the setup
// exchange, the doorbells and the ends.
func TestSharedMemoryModes(t *testing.T) {
	const size = 4 << 20
	for i, m := range allModes() {
		if m.markers || m.crc {
			continue // framing options: over shared memory they change nothing
		}
		t.Run(m.String(), func(t *testing.T) {
			a, p, as, ps, cfd, _ := shmPair(t, m.config())
			sa, sp := exchangeOn(t, a, p, size, int64(200+i), sendMixed)
			for _, s := range []Stats{sa, sp} {
				require.EqualValues(t, size, s.PayloadRx)
				require.EqualValues(t, size, s.PayloadTx)
			}
			k := kernelBytes(t, cfd)
			require.Less(t, k, uint64(size/16), "the kernel carried %d bytes: the payload went through it", k)
			t.Logf("kernel bytes %d; doorbells rung %d+%d, heard %d+%d; empty reads %d+%d",
				k, as.BellsRung, ps.BellsRung, as.BellsHeard, ps.BellsHeard, as.Empty, ps.Empty)
		})
	}
}

// TestSharedMemoryMarkersCRC: markers and CRC, if both ends ask for them,
// frame the stream as they frame TCP.
func TestSharedMemoryMarkersCRC(t *testing.T) {
	cfg := testConfig()
	cfg.Markers, cfg.CRC = true, true
	a, p, _, _, _, _ := shmPair(t, cfg)
	sa, _ := exchangeOn(t, a, p, 1<<20, 7, sendMixed)
	require.NotZero(t, sa.Rx.Markers)
	require.True(t, sa.CRC)
}

// TestSharedMemoryPeerGone: a peer that closes its socket without a word
// (a process killed) ends the connection as TCP's reset or end would;
// what it published before is delivered first.
func TestSharedMemoryPeerGone(t *testing.T) {
	a, p, _, _, _, afd := shmPair(t, testConfig())
	oneWay(t, p, a, 1000)
	_, err := p.Send([][]byte{[]byte("last words")}, time.Now())
	require.NoError(t, err)
	nul, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Dup3(nul, afd, unix.O_CLOEXEC)) // the passive end's socket closes
	require.NoError(t, unix.Close(nul))
	until := time.Now().Add(10 * time.Second)
	got, err := recvAll(t, a, 0, rand.New(rand.NewSource(1)), until)
	require.Equal(t, "last words", string(got))
	if err != nil {
		require.ErrorIs(t, err, unix.ECONNRESET)
	}
}

// BenchmarkSharedMemory: one-way throughput and ping-pong over the
// shared-memory stream (rings of 1 MiB) beside plain TCP, in one run:
//
//	go test -run '^$' -bench BenchmarkSharedMemory ./sdpcore
func BenchmarkSharedMemory(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Markers, cfg.CRC = false, false
	for _, size := range []int{64, 4 << 10, 64 << 10, 1 << 20} {
		b.Run("shm/"+sizeName(size), func(b *testing.B) {
			a, p, as, ps, _, _ := shmPairRing(b, cfg, 1<<20)
			tx, rx := benchOneWayOn(b, a, p, size, 0, 256<<10, 0)
			b.ReportMetric(float64(as.BellsRung+ps.BellsRung)/float64(b.N), "bells/op")
			b.ReportMetric(float64(tx.MsgsTx)/float64(b.N), "msgs/op")
			b.ReportMetric(float64(rx.MsgsTx)/float64(b.N), "back/op")
		})
		b.Run("tcp/"+sizeName(size), func(b *testing.B) { benchTCP(b, size) })
	}
	for _, size := range []int{1, 64} {
		b.Run("pingpong-shm/"+sizeName(size), func(b *testing.B) {
			a, p, _, _, _, _ := shmPairRing(b, cfg, 1<<20)
			benchPingPong(b, a, p, size)
		})
		b.Run("pingpong-sdp/"+sizeName(size), func(b *testing.B) {
			a, p := connPair(b, DefaultConfig())
			benchPingPong(b, a, p, size)
		})
		b.Run("pingpong-tcp/"+sizeName(size), func(b *testing.B) { benchPingPongTCP(b, size) })
	}
}

// benchPingPong: b.N round trips of size bytes, a echoing what p sends,
// each side waiting (bounded) as a blocking call does.
func benchPingPong(b *testing.B, a, p *Conn, size int) {
	until := time.Now().Add(5 * time.Minute)
	msg := make([]byte, size)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, size)
		for i := 0; i < b.N; i++ {
			if err := recvCount(b, a, buf, size, until); err != nil {
				done <- err
				return
			}
			if err := sendBytes(b, a, buf, 0, until); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	buf := make([]byte, size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := sendBytes(b, p, msg, 0, until); err != nil {
			b.Fatal(err)
		}
		if err := recvCount(b, p, buf, size, until); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// benchPingPongTCP is benchPingPong over plain TCP with blocking calls.
func benchPingPongTCP(b *testing.B, size int) {
	cfd, afd := tcpPair(b)
	benchPingPongTCPOn(b, cfd, afd, size)
}

// benchPingPongTCPOn is benchPingPongTCP over a given connection.
func benchPingPongTCPOn(b *testing.B, cfd, afd, size int) {
	for _, fd := range []int{cfd, afd} {
		require.NoError(b, unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1))
	}
	done := make(chan error, 1)
	full := func(fd int, buf []byte) error {
		for got := 0; got < len(buf); {
			n, err := unix.Read(fd, buf[got:])
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
			got += n
		}
		return nil
	}
	go func() {
		buf := make([]byte, size)
		for i := 0; i < b.N; i++ {
			if err := full(afd, buf); err != nil {
				done <- err
				return
			}
			if _, err := unix.Write(afd, buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	msg, buf := make([]byte, size), make([]byte, size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := unix.Write(cfd, msg); err != nil {
			b.Fatal(err)
		}
		if err := full(cfd, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// TestSharedMemoryHostilePeer: a peer that scribbles on the ring the
// connecting side reads (a producer position past the ring, a record
// longer than what was published) costs that connection only: its reads
// fail with EIO, and another connection over shared memory is untouched.
func TestSharedMemoryHostilePeer(t *testing.T) {
	for _, c := range []struct {
		name     string
		scribble func(ring []byte, head uint64)
	}{
		{"head past the ring", func(ring []byte, head uint64) {
			binary.LittleEndian.PutUint64(ring[64:], head+1<<40)
		}},
		{"record past what was published", func(ring []byte, head uint64) {
			at := shm.ControlSize + int(head%shmRing)
			binary.LittleEndian.PutUint64(ring[at:], 1<<20)
			binary.LittleEndian.PutUint64(ring[64:], head+8)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfd, afd := tcpPair(t)
			r, err := shm.Create(shmRing)
			require.NoError(t, err)
			peer, err := shm.Open(r.Fd(), shmRing)
			require.NoError(t, err)
			// The hostile view: the same memory, mapped as the peer can.
			evil, err := unix.Mmap(r.Fd(), 0, 2*shm.RingBytes(shmRing), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			require.NoError(t, err)
			require.NoError(t, r.CloseFd())
			t.Cleanup(func() { r.Close(); peer.Close(); _ = unix.Munmap(evil) })
			ps, err := shm.NewStream(r, true, afd)
			require.NoError(t, err)
			as, err := shm.NewStream(peer, false, cfd)
			require.NoError(t, err)
			a, p := connPairStream(t, testConfig(), cfd, afd, as, ps)
			oneWay(t, p, a, 1000)
			// The connecting side reads the first ring (the maker sends on it).
			ring := evil[:shm.RingBytes(shmRing)]
			head := binary.LittleEndian.Uint64(ring[64:])
			c.scribble(ring, head)
			_, err = recvWait(t, a, make([]byte, 64), 0, time.Now().Add(10*time.Second))
			require.ErrorIs(t, err, unix.EIO)
			require.ErrorIs(t, a.Err(), shm.ErrCorrupt)
			var pe *ProtoError
			require.ErrorAs(t, a.Failure(), &pe, "a broken ring is the peer's fault")
			require.NoError(t, a.Failure(), "told once")

			// Another connection over shared memory goes on.
			a2, p2, _, _, _, _ := shmPair(t, testConfig())
			oneWay(t, p2, a2, 100000)
			oneWay(t, a2, p2, 100000)
		})
	}
}

// TestSameHostNegotiated: the Hello asks, the HelloAck offers a
// rendezvous, the accepting side takes the region and rings, and both
// sides then move their messages through shared memory in the credit and
// transport flow controls (rdma and nic keep iWARP); where either side does
// not want it, both stay on the socket, and the connecting side's held
// messages follow its Reply there.
func TestSameHostNegotiated(t *testing.T) {
	const size = 2 << 20
	for _, fc := range []FlowControl{FlowCredit, FlowRDMA, FlowNIC, FlowTransport} {
		for _, c := range []struct {
			name         string
			active, pass bool
			want         bool
			note         string // the side that did not use it says
		}{
			{"both", true, true, !fc.ring(), "not with " + fc.String()},
			{"connecting-side-off", false, true, false, "off here"},
			{"accepting-side-off", true, false, false, "not offered"},
		} {
			t.Run(fc.String()+"/"+c.name, func(t *testing.T) {
				acfg, pcfg := testConfig(), testConfig()
				acfg.FlowControl, pcfg.FlowControl = fc, fc
				acfg.SameHost, pcfg.SameHost = c.active, c.pass
				a, p := connPairCfg(t, acfg, pcfg) // the accepting side asks when pcfg.SameHost, as the shim with SDP_SHM=1
				cfd := a.Fd()
				sa, sp := exchangeOn(t, a, p, size, 31, sendMixed)
				for _, s := range []Stats{sa, sp} {
					require.EqualValues(t, size, s.PayloadRx)
					require.EqualValues(t, size, s.PayloadTx)
					require.Equal(t, c.want, s.SharedMemory, "note: %q", s.SameHostNote)
				}
				k := kernelBytes(t, cfd)
				if c.want {
					require.False(t, sa.RxMarker, "the connecting side that offers asks for no markers")
					require.NotZero(t, sa.BellsRung+sp.BellsRung, "the doorbells are counted")
					require.Less(t, k, uint64(size/16), "the kernel carried %d bytes: the payload went through it", k)
				} else {
					require.Greater(t, k, uint64(2*size), "the kernel carried only %d bytes", k)
					notes := sa.SameHostNote + sp.SameHostNote
					if c.note == "not offered" {
						// The accepting side did not ask: its Hello had no bit, and
						// nobody offered.
						require.Empty(t, notes)
					} else {
						require.Contains(t, notes, c.note)
					}
				}
			})
		}
	}
}

// TestSameHostDeclined: the connecting side offers, and an accepting side
// that asked but cannot take it (here: its engine does not allow it, as
// when its rendezvous is in another network namespace) sends its first
// FPDU over the socket; the connecting side follows.
func TestSameHostDeclined(t *testing.T) {
	acfg, pcfg := testConfig(), testConfig()
	acfg.SameHost, pcfg.SameHost = true, true
	cfd, afd := tcpPair(t)
	pcfg.Sanitize()
	req := writeRequest(t, afd, pcfg) // asks for shared memory
	pcfg.SameHost = false             // the accepting engine declines
	p, err := NewPassive(afd, pcfg, req)
	require.NoError(t, err)
	a := NewActive(cfd, acfg, time.Now())
	closeAtCleanup(t, a, p)
	sa, sp := exchangeOn(t, a, p, 1<<20, 5, sendMixed)
	require.False(t, sa.SharedMemory)
	require.False(t, sp.SharedMemory)
	require.EqualValues(t, 1<<20, sa.PayloadRx)
	require.EqualValues(t, 1<<20, sp.PayloadRx)
}

// TestSameHostHostileChoice: an accepting side that rings the doorbell
// octet (it says it took the shared memory) without handing over a valid
// region fails that one connection with a clear error; the connecting
// side never reads the rest of its socket as FPDUs, and another
// connection over shared memory goes on.
func TestSameHostHostileChoice(t *testing.T) {
	for _, c := range []struct {
		name string
		give func(t *testing.T, name shm.Name)
	}{
		{"no-region", func(*testing.T, shm.Name) {}},
		{"unsealed-region", func(t *testing.T, name shm.Name) {
			// A memfd the sender could shrink under the mapping (SIGBUS).
			fd, err := unix.MemfdCreate("hostile", unix.MFD_CLOEXEC)
			require.NoError(t, err)
			defer unix.Close(fd)
			require.NoError(t, unix.Ftruncate(fd, int64(2*shm.RingBytes(shm.MinData))))
			s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			defer unix.Close(s)
			require.NoError(t, unix.Connect(s, &unix.SockaddrUnix{Name: "@libsdp-" + hex.EncodeToString(name[:])}))
			var msg [4]byte
			binary.LittleEndian.PutUint32(msg[:], shm.MinData)
			require.NoError(t, unix.Sendmsg(s, msg[:], unix.UnixRights(fd), nil, 0))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SameHost = true
			good, goodP := connPairCfg(t, cfg, cfg)

			cfd, afd := tcpPair(t)
			writeRequest(t, afd, cfg) // the hostile accepting side asks for shared memory
			a := NewActive(cfd, cfg, time.Now())
			closeAtCleanup(t, a)
			until := time.Now().Add(20 * time.Second)
			done := make(chan error, 1)
			go func() {
				_, err := recvAll(t, a, 0, rand.New(rand.NewSource(1)), until)
				done <- err
			}()
			// The raw accepting side reads the Reply and its offer.
			var reply []byte
			buf := make([]byte, 512)
			for i := 0; i < 200 && len(reply) < 20+48; i++ {
				pfd := []unix.PollFd{{Fd: int32(afd), Events: unix.POLLIN}}
				_, _ = unix.Poll(pfd, 100)
				n, err := unix.Read(afd, buf)
				if err == unix.EAGAIN || err == unix.EINTR {
					continue
				}
				require.NoError(t, err)
				reply = append(reply, buf[:n]...)
			}
			f, _, err := iwarp.ParseMPAFrame(reply, true)
			require.NoError(t, err)
			ha, err := ParseHelloAck(f.PrivateData)
			require.NoError(t, err)
			require.NotZero(t, ha.Cap&CapSameHost, "the HelloAck offers shared memory")
			c.give(t, shm.Name(ha.SameHost))
			_, err = unix.Write(afd, []byte{shm.Bell, 0, 0, 0, 0, 0, 0, 0}) // then bytes that are no FPDU
			require.NoError(t, err)
			select {
			case err := <-done:
				require.Error(t, err)
				require.Equal(t, unix.EIO, Errno(err), "%v", err)
				require.ErrorContains(t, a.Err(), "took shared memory")
			case <-time.After(10 * time.Second):
				t.Fatal("the connecting side did not fail")
			}
			// The other connection is untouched.
			sa, sp := exchangeOn(t, good, goodP, 256<<10, 3, sendMixed)
			require.True(t, sa.SharedMemory && sp.SharedMemory)
		})
	}
}

// TestSpinNoDoorbell: a reader that polls shared memory before it sleeps
// (Spin) withdraws its sleep announcement, so the writer's next message
// reaches it without a doorbell; a reader that does not poll gets one.
func TestSpinNoDoorbell(t *testing.T) {
	a, p, as, _, _, _ := shmPair(t, testConfig())
	oneWay(t, a, p, 1000)
	oneWay(t, p, a, 1000)
	buf := make([]byte, 100)
	// p's reads find the ring empty: its stream announces that it sleeps.
	_, err := p.Recv([][]byte{buf}, 0, time.Now())
	require.ErrorIs(t, err, ErrWouldBlock)
	rung := as.BellsRung
	_, err = a.Send([][]byte{[]byte("rung")}, time.Now())
	require.NoError(t, err)
	require.Equal(t, rung+1, as.BellsRung, "a sleeping reader is rung")
	k, err := p.Recv([][]byte{buf}, 0, time.Now())
	require.NoError(t, err)
	require.Equal(t, "rung", string(buf[:k]))
	_, err = p.Recv([][]byte{buf}, 0, time.Now())
	require.ErrorIs(t, err, ErrWouldBlock)

	spins := p.Stats().Spins
	done := make(chan bool, 1)
	go func() { done <- p.Spin(20 * time.Second) }()
	for i := 0; i < 1_000_000 && p.Stats().Spins == spins; i++ {
		runtime.Gosched() // until p polls
	}
	require.Equal(t, spins+1, p.Stats().Spins, "p did not start polling")
	rung = as.BellsRung
	_, err = a.Send([][]byte{[]byte("polled")}, time.Now())
	require.NoError(t, err)
	require.True(t, <-done, "the poll saw the message")
	require.Equal(t, rung, as.BellsRung, "no doorbell for a polling reader")
	k, err = p.Recv([][]byte{buf}, 0, time.Now())
	require.NoError(t, err)
	require.Equal(t, "polled", string(buf[:k]))
	require.EqualValues(t, 1, p.Stats().SpinHits)

	// Over TCP there is nothing to poll.
	ta, tp := connPair(t, testConfig())
	oneWay(t, ta, tp, 100)
	require.False(t, tp.Spin(time.Second))
	require.Zero(t, tp.Stats().Spins)
}

// TestSameHostAbortBeforeChoice: a connecting side that resets the
// connection (SO_LINGER 0) before the accepting side has chosen sends
// what it held over TCP first, as TCP would have delivered it; the
// accepting side, finding FPDUs after the Reply, stays on TCP and reads
// them before the reset.
func TestSameHostAbortBeforeChoice(t *testing.T) {
	cfg := testConfig()
	cfg.SameHost = true
	a, p := connPairCfg(t, cfg, cfg)
	cfd := a.Fd()
	_, err := a.Send([][]byte{[]byte("hello")}, time.Now())
	require.NoError(t, err)
	require.True(t, a.Stats().Up, "the connecting side has replied")
	a.Abort(time.Now())
	require.NoError(t, unix.SetsockoptLinger(cfd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}))
	nul, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Dup3(nul, cfd, unix.O_CLOEXEC)) // the reset
	require.NoError(t, unix.Close(nul))
	got, err := recvAll(t, p, 0, rand.New(rand.NewSource(1)), time.Now().Add(10*time.Second))
	require.Equal(t, "hello", string(got))
	require.ErrorIs(t, err, unix.ECONNRESET)
	s := p.Stats()
	require.False(t, s.SharedMemory)
	require.Contains(t, s.SameHostNote, "withdrew")
}

// TestSameHostWithdrawAtExit: an exiting connecting side withdraws an
// offer nobody answered yet, so what it held reaches the kernel, which
// delivers it after the process is gone; one whose answer has already
// come takes the shared memory instead and publishes there.
func TestSameHostWithdrawAtExit(t *testing.T) {
	cfg := testConfig()
	cfg.SameHost = true
	t.Run("unanswered", func(t *testing.T) {
		a, p := connPairCfg(t, cfg, cfg)
		cfd := a.Fd()
		_, err := a.Send([][]byte{[]byte("hello")}, time.Now())
		require.NoError(t, err)
		a.WithdrawSameHost()
		require.NoError(t, a.Shutdown(false, true, time.Now()))
		nul, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		require.NoError(t, unix.Dup3(nul, cfd, unix.O_CLOEXEC)) // the process is gone
		require.NoError(t, unix.Close(nul))
		got, err := recvAll(t, p, 0, rand.New(rand.NewSource(1)), time.Now().Add(10*time.Second))
		require.Equal(t, "hello", string(got))
		if err != nil {
			require.ErrorIs(t, err, unix.ECONNRESET)
		}
		require.False(t, p.Stats().SharedMemory)
	})
	t.Run("answered", func(t *testing.T) {
		a, p := connPairCfg(t, cfg, cfg)
		_, err := a.Send([][]byte{[]byte("hello")}, time.Now())
		require.NoError(t, err)
		buf := make([]byte, 16)
		_, err = p.Recv([][]byte{buf}, 0, time.Now()) // p reads the Reply and takes the region
		require.ErrorIs(t, err, ErrWouldBlock)
		require.True(t, p.Stats().SharedMemory)
		a.WithdrawSameHost()
		require.True(t, a.Stats().SharedMemory, "the answer was there: taken, not withdrawn")
		until := time.Now().Add(10 * time.Second)
		var got []byte
		for i := 0; i < 1000 && len(got) < 5; i++ {
			k, err := p.Recv([][]byte{buf}, 0, time.Now())
			if err == ErrWouldBlock {
				require.NoError(t, wait(t, p, EvIn, until))
				continue
			}
			require.NoError(t, err)
			got = append(got, buf[:k]...)
		}
		require.Equal(t, "hello", string(got))
	})
}

// TestHelloLocal: the accepting side asks for neither markers nor CRC of a
// connecting side on its host, when it allows shared memory.
func TestHelloLocal(t *testing.T) {
	v4 := func(a, b, c, d byte) (ip [16]byte) { ip[12], ip[13], ip[14], ip[15] = a, b, c, d; return ip }
	mapped := func(a, b, c, d byte) [16]byte { ip := v4(a, b, c, d); ip[10], ip[11] = 0xff, 0xff; return ip }
	one, six := [16]byte{15: 1}, [16]byte{0: 0x20, 1: 0x01, 15: 5}
	for _, c := range []struct {
		name     string
		ipv      uint8
		src, dst [16]byte
		local    bool
	}{
		{"loopback", 4, v4(127, 0, 0, 1), v4(127, 0, 0, 1), true},
		{"loopback-other", 4, v4(127, 0, 0, 1), v4(127, 3, 2, 1), true},
		{"v4-mapped-loopback", 4, mapped(127, 0, 0, 1), mapped(127, 0, 0, 1), true},
		{"ipv6-loopback", 6, one, one, true},
		{"ipv6-loopback-from-elsewhere", 6, six, one, true},
		{"ipv6-other-host", 6, six, [16]byte{0: 0x20, 1: 0x01, 15: 6}, false},
		{"own-address", 4, v4(192, 168, 1, 5), v4(192, 168, 1, 5), true},
		{"other-host", 4, v4(192, 168, 1, 5), v4(192, 168, 1, 6), false},
		{"other-host-mapped", 4, mapped(10, 0, 0, 1), mapped(10, 0, 0, 2), false},
		{"unknown", 4, [16]byte{}, [16]byte{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &Hello{Bufs: 16, IPVersion: c.ipv, MaxAdverts: 1, DesRemRcvSz: 65536, LocalRcvSz: 65536, SrcIP: c.src, DstIP: c.dst}
			require.Equal(t, c.local, h.Local())
			for _, shm := range []bool{false, true} {
				cfg := testConfig()
				cfg.Markers, cfg.CRC, cfg.SameHost = true, true, shm
				f, _, err := iwarp.ParseMPAFrame(AppendRequest(nil, cfg, h), false)
				require.NoError(t, err)
				framed := !(shm && c.local)
				require.Equal(t, framed, f.Markers, "M with SDP_SHM=%v", shm)
				require.Equal(t, framed, f.CRC, "C with SDP_SHM=%v", shm)
			}
		})
	}
}

// TestPassiveLocalFromHello: the accepting side takes whether its peer is
// on this host from the addresses of its own Hello, which the shim filled
// from the socket, instead of asking the kernel again; a Hello without
// addresses leaves it to the socket. Over loopback the socket says local,
// so a Hello that names two hosts shows which was asked.
func TestPassiveLocalFromHello(t *testing.T) {
	v4 := func(a, b, c, d byte) (ip [16]byte) { ip[12], ip[13], ip[14], ip[15] = a, b, c, d; return ip }
	for _, c := range []struct {
		name     string
		src, dst [16]byte
		local    bool
	}{
		{"hello-other-host", v4(10, 0, 0, 1), v4(10, 0, 0, 2), false},
		{"hello-loopback", v4(127, 0, 0, 1), v4(127, 0, 0, 1), true},
		{"no-addresses", [16]byte{}, [16]byte{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Sanitize()
			_, afd := tcpPair(t)
			h := &Hello{Bufs: uint16(cfg.RecvBufs), IPVersion: 4, MaxAdverts: 1, DesRemRcvSz: uint32(cfg.BufSize),
				LocalRcvSz: uint32(cfg.BufSize), SrcIP: c.src, DstIP: c.dst}
			p, err := NewPassive(afd, cfg, AppendRequest(nil, cfg, h))
			require.NoError(t, err)
			require.Equal(t, c.local, p.tr.(*qpTransport).qp().PeerLocal())
		})
	}
}
