package sdpcore

import (
	"bytes"
	"errors"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"golang.org/x/sys/unix"
	"libsdp/internal/testnet"
	"libsdp/iwarp"
)

// tcpPair returns the two ends of a loopback TCP connection: the connecting
// one and the accepted one.
func tcpPair(t testing.TB) (int, int) { return testnet.TCPPair(t) }

// testZCopyThreshold is the zero-copy threshold of the tests' configuration.
// The product's default (0) never uses zero copy, which is slower than
// buffer copy over kernel TCP at every size measured (docs/PERFORMANCE.md);
// the tests keep covering zero copy's paths, still selectable, from the
// papers' 32 KiB on, and set 0 where they test the default.
const testZCopyThreshold = 32 << 10

// testConfig is DefaultConfig with zero copy from testZCopyThreshold on.
func testConfig() Config {
	c := DefaultConfig()
	c.ZCopyThreshold = testZCopyThreshold
	// The package's tests are iWARP's over TCP; shared memory has its own
	// (samehost_test.go), which set SameHost where they want it.
	c.SameHost = false
	return c
}

// connPair sets up an SDP connection the way the shim does: the accepting
// side writes the MPA Request first.
func connPair(t testing.TB, cfg Config) (*Conn, *Conn) {
	t.Helper()
	cfd, afd := tcpPair(t)
	return connPairOn(t, cfg, cfd, afd)
}

// connPairOn is connPair over a given connection (cfd connected, afd accepted).
func connPairOn(t testing.TB, cfg Config, cfd, afd int) (*Conn, *Conn) {
	t.Helper()
	return connPairStream(t, cfg, cfd, afd, nil, nil)
}

// writeRequest writes the MPA Request with the Hello cfg makes (as the
// shim does on an accepted socket) to afd and returns it.
func writeRequest(t testing.TB, afd int, cfg Config) []byte {
	t.Helper()
	cfg.Sanitize()
	h := &Hello{Bufs: uint16(cfg.RecvBufs), IPVersion: 4, MaxAdverts: 1,
		DesRemRcvSz: uint32(cfg.BufSize), LocalRcvSz: uint32(cfg.BufSize), LocalPort: 80, FlowControl: cfg.FlowControl}
	req := AppendRequest(nil, cfg, h)
	n, err := unix.Write(afd, req)
	require.NoError(t, err)
	require.Equal(t, len(req), n)
	return req
}

// connPairStream is connPairOn with each side's messages over a stream
// (nil: over the socket).
func connPairStream(t testing.TB, cfg Config, cfd, afd int, as, ps iwarp.ByteStream) (*Conn, *Conn) {
	t.Helper()
	cfg.Sanitize()
	cfg.SameHost = false // the pair's transport is the caller's choice (as, ps), not negotiated
	req := writeRequest(t, afd, cfg)
	p, err := NewPassiveStream(afd, cfg, req, ps)
	require.NoError(t, err)
	a := NewActiveStream(cfd, cfg, time.Now(), as)
	closeAtCleanup(t, a, p)
	return a, p
}

// closeAtCleanup stops what still drives a and p (the progress goroutine,
// background flushes) before the test's sockets are closed: a failed test
// must not leave them writing into descriptors a later test reuses.
func closeAtCleanup(t testing.TB, cs ...*Conn) {
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close(time.Now())
		}
	})
}

// wait blocks (bounded) until c says want may be ready. Like the engine
// it also waits on the connection's eventfd, as a counted sleeper
// (PollWait): another goroutine (a reader, or the progress goroutine) may
// drain the socket into c's buffers.
func wait(t testing.TB, c *Conn, want Events, until time.Time) error {
	return waitLook(t, c, want, until, false)
}

// waitLook is wait, or with recv a blocking receive's own wait as the shim
// makes it (SDP_POLL_RECV: PollWaitRecv).
func waitLook(t testing.TB, c *Conn, want Events, until time.Time, recv bool) error {
	woke := false
	defer func() {
		if woke {
			c.Woke()
		}
	}()
	for {
		if time.Now().After(until) {
			return errors.New("timed out waiting")
		}
		var ready, kw Events
		var efd int
		var err error
		if recv {
			ready, kw, _, _, efd, err = c.PollWaitRecv(want, time.Now(), woke, -1)
		} else {
			ready, kw, _, _, efd, err = c.PollWait(want, time.Now(), woke, true)
		}
		woke = false
		if err != nil {
			return err
		}
		if ready&(want|EvErr|EvHup) != 0 {
			return nil
		}
		woke = efd >= 0
		if kw == 0 {
			kw = EvIn
		}
		pfd := []unix.PollFd{{Fd: int32(c.Fd()), Events: kw}, {Fd: int32(efd), Events: unix.POLLIN}}
		if efd < 0 {
			pfd = pfd[:1]
		}
		_, err = unix.Poll(pfd, 100)
		if err != nil && err != unix.EINTR {
			return err
		}
		if len(pfd) > 1 && pfd[1].Revents&unix.POLLIN != 0 {
			var b [8]byte
			_, _ = unix.Read(efd, b[:])
		}
	}
}

// recvWait repeats a receive into b with flags until it does not say
// ErrWouldBlock, waiting (bounded) in between, as the shim does for one
// blocking call: a waiting receive (RecvWait) must be repeated with the
// same buffer, which zero copy may be filling.
func recvWait(tb testing.TB, c *Conn, b []byte, flags RecvFlags, until time.Time) (int, error) {
	for {
		n, err := c.Recv([][]byte{b}, flags, time.Time{}) // "now, if needed", as the preload passes
		if err != ErrWouldBlock {
			return n, err
		}
		if err := wait(tb, c, EvIn, until); err != nil {
			return 0, err
		}
	}
}

func sendAll(t *testing.T, c *Conn, data []byte, rng *rand.Rand, until time.Time) error {
	for len(data) > 0 {
		n := 1 + rng.Intn(256<<10)
		if rng.Intn(4) == 0 {
			n = 1 + rng.Intn(64)
		}
		if n > len(data) {
			n = len(data)
		}
		k, err := c.Send([][]byte{data[:n]}, time.Now())
		if err == ErrWouldBlock {
			if err := wait(t, c, EvOut, until); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		data = data[k:]
	}
	return nil
}

func recvAll(t *testing.T, c *Conn, want int, rng *rand.Rand, until time.Time) ([]byte, error) {
	got := make([]byte, 0, want)
	buf := make([]byte, 300<<10)
	for {
		n := 1 + rng.Intn(len(buf))
		var flags RecvFlags
		if rng.Intn(2) == 0 {
			flags = RecvWait // a blocking receive: zero copy may read into it
		}
		k, err := recvWait(t, c, buf[:n], flags, until)
		if err != nil {
			return got, err
		}
		if k == 0 {
			return got, nil
		}
		got = append(got, buf[:k]...)
	}
}

// exchange streams size random bytes each way at once, with random send and
// receive sizes, then closes both ends and checks every byte.
func exchange(t *testing.T, cfg Config, size int, seed int64) (Stats, Stats) {
	return exchangeWith(t, cfg, size, seed, sendAll)
}

// exchangeWith sends size random bytes each way at once, each side sending
// with send and then shutting down its sending side, each receiving with
// random sizes, and checks every byte. It returns both ends' counters.
func exchangeWith(t *testing.T, cfg Config, size int, seed int64,
	send func(*testing.T, *Conn, []byte, *rand.Rand, time.Time) error) (Stats, Stats) {
	a, p := connPair(t, cfg)
	return exchangeOn(t, a, p, size, seed, send)
}

// shutWrite shuts down c's sending side and, as the engine does after
// shutdown, lets a background goroutine finish what is still queued.
func shutWrite(c *Conn) error {
	err := c.Shutdown(false, true, time.Now())
	if c.NeedsBackground() {
		go c.Background(time.Minute)
	}
	return err
}

// exchangeOn is exchangeWith between a and p, the active and the passive end.
func exchangeOn(t *testing.T, a, p *Conn, size int, seed int64,
	send func(*testing.T, *Conn, []byte, *rand.Rand, time.Time) error) (Stats, Stats) {
	until := time.Now().Add(120 * time.Second)
	rng := rand.New(rand.NewSource(seed))
	dataA, dataP := make([]byte, size), make([]byte, size)
	rng.Read(dataA)
	rng.Read(dataP)
	var wg sync.WaitGroup
	var gotA, gotP []byte
	errs := make([]error, 4)
	wg.Add(4)
	sendSide := func(i int, c *Conn, data []byte) {
		defer wg.Done()
		errs[i] = send(t, c, data, rand.New(rand.NewSource(seed+int64(i)+1)), until)
		if errs[i] == nil {
			errs[i] = shutWrite(c)
		}
	}
	go sendSide(0, a, dataA)
	go sendSide(1, p, dataP)
	go func() {
		defer wg.Done()
		gotA, errs[2] = recvAll(t, a, size, rand.New(rand.NewSource(seed+3)), until)
	}()
	go func() {
		defer wg.Done()
		gotP, errs[3] = recvAll(t, p, size, rand.New(rand.NewSource(seed+4)), until)
	}()
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "worker %d\nactive:  %v\npassive: %v", i, a, p)
	}
	require.True(t, bytes.Equal(dataP, gotA), "active side received %d bytes, not the %d sent", len(gotA), len(dataP))
	require.True(t, bytes.Equal(dataA, gotP), "passive side received %d bytes, not the %d sent", len(gotP), len(dataA))
	sa, sp := a.Stats(), p.Stats()
	closeBoth(t, a, p)
	return sa, sp
}

func TestStreamBothWays(t *testing.T) {
	for _, tc := range []struct {
		name         string
		markers, crc bool
		unaligned    bool
	}{
		{"markers+crc", true, true, false},
		{"crc", false, true, false},
		{"markers", true, false, false},
		{"plain", false, false, false},
		{"markers+crc-unaligned", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Markers, cfg.CRC, cfg.Unaligned = tc.markers, tc.crc, tc.unaligned
			cfg.AlignLocal = !tc.unaligned // aligned over loopback as between hosts
			sa, sp := exchange(t, cfg, 8<<20, 42)
			require.True(t, sa.Up && sp.Up)
			require.EqualValues(t, 8<<20, sa.PayloadRx)
			require.EqualValues(t, 8<<20, sp.PayloadRx)
			if tc.markers {
				require.NotZero(t, sa.Rx.Markers)
				require.NotZero(t, sp.Rx.Markers)
			} else {
				require.Zero(t, sa.Rx.Markers)
			}
			if tc.crc {
				require.NotZero(t, sa.Rx.CRCBytes)
			}
		})
	}
}

func TestSmallBuffersManyCredits(t *testing.T) {
	cfg := testConfig()
	cfg.BufSize, cfg.RecvBufs = minRecvBufSz, minRecvBufs
	sa, _ := exchange(t, cfg, 1<<20, 7)
	require.NotZero(t, sa.CreditUpdates)
}

func TestCloseDeliversEverythingThenEOF(t *testing.T) {
	a, p := connPair(t, testConfig())
	until := time.Now().Add(20 * time.Second)
	data := bytes.Repeat([]byte("libsdp"), 100000)
	done := make(chan error, 1)
	go func() {
		err := sendAll(t, p, data, rand.New(rand.NewSource(1)), until)
		if err == nil && !p.Close(time.Now()) {
			err = errors.New("close did not finish: the peer's DisConn has not arrived yet")
			go p.Linger(mustDup(t, p.Fd()), until, nil)
			err = nil
		}
		done <- err
	}()
	got, err := recvAll(t, a, len(data), rand.New(rand.NewSource(2)), until)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Equal(t, data, got)
	k, err := a.Send([][]byte{[]byte("x")}, time.Now())
	require.NoError(t, err, "the peer only closed its sending side as far as we know")
	require.Equal(t, 1, k)
}

func TestCorruptedStreamFailsWithEIO(t *testing.T) {
	cfd, afd := tcpPair(t)
	cfg := testConfig()
	h := &Hello{Bufs: 16, IPVersion: 4, MaxAdverts: 1, DesRemRcvSz: 65536, LocalRcvSz: 65536}
	req := AppendRequest(nil, cfg, h)
	_, err := unix.Write(afd, req)
	require.NoError(t, err)
	a := NewActive(cfd, cfg, time.Now())
	until := time.Now().Add(10 * time.Second)
	// Drive the active side until it has sent its Reply, then play a peer
	// that sends an FPDU with a broken CRC.
	_, _, _, err = a.Poll(EvOut, time.Now())
	require.NoError(t, err)
	buf := make([]byte, 4096)
	n, err := unix.Read(afd, buf)
	require.NoError(t, err)
	require.Greater(t, n, 20, "the Reply")
	garbage := []byte{0, 0, 0, 0, 0, 0x12, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef}
	_, err = unix.Write(afd, garbage)
	require.NoError(t, err)
	_, err = recvAll(t, a, 0, rand.New(rand.NewSource(3)), until)
	require.ErrorIs(t, err, unix.EIO)
	// The engine's log line: the reason, once.
	var pe *ProtoError
	require.ErrorAs(t, a.Failure(), &pe)
	require.ErrorContains(t, pe, "CRC")
	require.NoError(t, a.Failure(), "told once")
}

func TestForeignBannerFallsBack(t *testing.T) {
	cfd, afd := tcpPair(t)
	a := NewActive(cfd, testConfig(), time.Now())
	_, err := unix.Write(afd, []byte("SSH-2.0-OpenSSH_9.2\r\n"))
	require.NoError(t, err)
	err = wait(t, a, EvIn, time.Now().Add(5*time.Second))
	var fb *FallbackError
	require.ErrorAs(t, err, &fb)
	require.Equal(t, "foreign", fb.Reason)
}

func TestSilentPeerTimesOut(t *testing.T) {
	cfd, _ := tcpPair(t)
	cfg := testConfig()
	cfg.ConnectTimeout = 50 * time.Millisecond
	start := time.Now()
	a := NewActive(cfd, cfg, start)
	_, _, deadline, err := a.Poll(EvOut, start)
	require.NoError(t, err)
	require.Equal(t, start.Add(cfg.ConnectTimeout), deadline)
	_, _, _, err = a.Poll(EvOut, deadline)
	var fb *FallbackError
	require.ErrorAs(t, err, &fb)
	require.Equal(t, "timeout", fb.Reason)
}

func mustDup(t testing.TB, fd int) int {
	d, err := unix.Dup(fd)
	require.NoError(t, err)
	return d
}

// TestSilentClientTimesOut: an accepted connection whose peer never sends (or never
// finishes) the MPA Reply ends with ETIMEDOUT once the handshake timeout has passed, so a
// peer cannot hold the server's descriptor and memory for ever.
func TestSilentClientTimesOut(t *testing.T) {
	for _, partial := range []bool{false, true} {
		cfd, afd := tcpPair(t)
		cfg := testConfig()
		cfg.HandshakeTimeout = 50 * time.Millisecond
		cfg.Sanitize()
		h := &Hello{Bufs: uint16(cfg.RecvBufs), IPVersion: 4, DesRemRcvSz: uint32(cfg.BufSize),
			LocalRcvSz: uint32(cfg.BufSize), LocalPort: 80}
		req := AppendRequest(nil, cfg, h)
		_, err := unix.Write(afd, req)
		require.NoError(t, err)
		if partial { // the first octets of a Reply, then nothing
			_, err = unix.Write(cfd, []byte("MPA ID Rep Fr"))
			require.NoError(t, err)
		}
		before := time.Now()
		p, err := NewPassive(afd, cfg, req)
		require.NoError(t, err)
		closeAtCleanup(t, p)
		ready, _, deadline, err := p.Poll(EvIn, time.Now())
		require.NoError(t, err)
		require.Zero(t, ready&EvIn, "nothing to read during the handshake")
		require.False(t, deadline.IsZero(), "the poller is told when the handshake times out")
		require.False(t, deadline.Before(before.Add(cfg.HandshakeTimeout)))
		require.WithinDuration(t, before.Add(cfg.HandshakeTimeout), deadline, time.Second)

		ready, _, _, err = p.Poll(EvIn, deadline)
		require.NoError(t, err)
		require.NotZero(t, ready&EvErr, "partial=%v: the connection failed at its deadline", partial)
		var ht *HandshakeTimeoutError
		require.ErrorAs(t, p.Err(), &ht)
		n, err := p.Recv([][]byte{make([]byte, 16)}, 0, deadline)
		require.Zero(t, n)
		require.Equal(t, unix.ETIMEDOUT, Errno(err), "the application's read gets ETIMEDOUT")
	}
}

// TestCreditsCrossedAtZero: both ends spend their last credit on messages
// that cross, each offering the one buffer its application has left
// unread (zero copy's RdmaRdCompl, SendSM and nudges may use the last
// credit, whatever they offer); each message takes the buffer the other
// offered, and both ends are left with no credits. Once the applications
// have read, data must flow again both ways: an end with no credits tells
// the other about the buffers it emptied (a credit update needs none).
// TestModesMatrix met this state under load and hung.
func TestCreditsCrossedAtZero(t *testing.T) {
	cfg := testConfig()
	cfg.RecvBufs, cfg.BufSize = 4, 4096
	a, p := connPair(t, cfg)
	until := time.Now().Add(20 * time.Second)
	locked := func(c *Conn, f func()) { c.mu.Lock(); defer c.mu.Unlock(); f() }
	credits := func(c *Conn) (n, posted int) { locked(c, func() { n, posted = c.credits(), c.posted }); return }
	// settle lets c handle every message from has sent, without reading.
	settle := func(c, from *Conn) {
		for {
			var sent, got uint32
			locked(from, func() { sent = from.mseq })
			locked(c, func() { got = c.recvSeq })
			if got == sent {
				return
			}
			require.True(t, time.Now().Before(until), "%v", c)
			_, _, _, err := c.Poll(EvIn, time.Now())
			require.NoError(t, err)
		}
	}
	// fill sends one-byte Data messages from c while it has two credits.
	fill := func(c *Conn, most int) {
		for i := 0; i < most; i++ {
			if n, _ := credits(c); n < 2 {
				return
			}
			k, err := c.Send([][]byte{{'x'}}, time.Now())
			require.NoError(t, err)
			require.Equal(t, 1, k)
		}
	}
	for !a.Established() || !p.Established() {
		require.True(t, time.Now().Before(until))
		_, _, _, err := a.Poll(EvOut, time.Now())
		require.NoError(t, err)
		_, _, _, err = p.Poll(EvOut, time.Now())
		require.NoError(t, err)
	}
	settle(p, a)
	settle(a, p)
	fill(a, 10)
	settle(p, a)
	fill(p, 10)
	settle(a, p)
	for _, c := range []*Conn{a, p} {
		n, posted := credits(c)
		require.Equal(t, 1, n, "staged: the last credit, %v", c)
		require.Equal(t, 1, posted, "staged: one buffer left unread, %v", c)
	}
	for _, c := range []*Conn{a, p} { // the crossing messages
		locked(c, func() { c.sendControl(MIDData); require.NoError(t, c.flush()) })
	}
	settle(a, p)
	settle(p, a)
	for _, c := range []*Conn{a, p} {
		n, _ := credits(c)
		require.Equal(t, 0, n, "staged: no credits on either end, %v", c)
	}
	// The applications read what they hold, then send again.
	buf := make([]byte, 64)
	for _, c := range []*Conn{a, p} {
		k, err := c.Recv([][]byte{buf}, 0, time.Now())
		require.NoError(t, err)
		require.NotZero(t, k)
	}
	oneWay(t, a, p, 100000)
	oneWay(t, p, a, 100000)
}

// TestUpdateNeedsNoBuffer: a receiver whose buffers all hold unread data
// takes a credit update (it holds no buffer) but not a Data message with
// payload, which would be beyond the credits it granted.
func TestUpdateNeedsNoBuffer(t *testing.T) {
	a, p := connPair(t, testConfig())
	oneWay(t, p, a, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.posted = 0 // white box: every buffer holds unread data
	msg := func(mid MID, payload int) BSDH {
		b := make([]byte, BSDHLen)
		EncodeBSDH(b, BSDHFields{MID: mid, Bufs: 4, Len: uint32(BSDHLen + payload), MSeq: a.recvSeq + 1, MSeqAck: a.mseq})
		return BSDH(b)
	}
	require.NoError(t, a.onHeader(msg(MIDData, 0), BSDHLen))
	require.False(t, a.msgHeld, "an update holds no buffer")
	require.Zero(t, a.posted)
	a.inMsg = false // it ended with its header
	err := a.onHeader(msg(MIDData, 1), BSDHLen)
	require.ErrorContains(t, err, "beyond the credits")
}
