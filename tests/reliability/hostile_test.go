package reliability

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A hostile peer connects to a preloaded server's SDP port without libsdp and speaks whatever
// it likes after the server's MPA Request. Meanwhile a preloaded client keeps using the same
// server, which must serve it throughout, end each hostile connection on its own, and keep its
// memory bounded.

// hostilePeer is one connection to the SDP port, past the server's MPA Request.
type hostilePeer struct {
	c       *net.TCPConn
	markers bool   // the server asked for markers (M in its Request)
	hello   []byte // the server's Hello, the Request's private data
	tx      *framer
	mseq    uint32
	pending []byte
}

// dialHostile connects to the SDP port and reads the MPA Request.
func dialHostile(addr string) (*hostilePeer, error) {
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	p := &hostilePeer{c: c.(*net.TCPConn)}
	_ = p.c.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 20)
	if _, err := io.ReadFull(p.c, hdr); err != nil {
		p.c.Close()
		return nil, fmt.Errorf("reading the MPA Request: %w", err)
	}
	pd := make([]byte, binary.BigEndian.Uint16(hdr[18:20]))
	if _, err := io.ReadFull(p.c, pd); err != nil {
		p.c.Close()
		return nil, fmt.Errorf("reading the MPA Request: %w", err)
	}
	if string(hdr[:16]) != "MPA ID Req Frame" {
		p.c.Close()
		return nil, fmt.Errorf("the server's MPA Request has key %q", hdr[:16])
	}
	p.markers = hdr[16]&mpaFlagM != 0
	p.hello = pd
	return p, nil
}

// reply sends a valid MPA Reply with a HelloAck and sets up the FPDU framer.
func (p *hostilePeer) reply() error {
	_, err := p.c.Write(mpaReply(true, true, helloAck(16, 65536)))
	p.tx = &framer{markers: p.markers, crc: true}
	return err
}

// dataULPDU is an untagged Send carrying an SDP Data message with payload.
func (p *hostilePeer) dataULPDU(payload []byte) []byte {
	p.mseq++
	u := untagged(true, opSend, qnSend, p.mseq, 0)
	u = append(u, bsdh(midData, 16, uint32(bsdhLen+len(payload)), p.mseq, 0)...)
	return append(u, payload...)
}

// queue frames ulpdu as one FPDU (valid CRC, markers where the server asked for them).
func (p *hostilePeer) queue(ulpdu []byte) {
	p.pending = append(p.pending, p.tx.fpdu(ulpdu)...)
}

func (p *hostilePeer) flush() error {
	_, err := p.c.Write(p.pending)
	p.pending = p.pending[:0]
	return err
}

// ended reports whether the server ended the connection (EOF or reset) within d, reading and
// dropping whatever it sends until then.
func (p *hostilePeer) ended(d time.Duration) bool {
	_ = p.c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		_, err := p.c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// echoed reads from the server until want has arrived as the payload of its FPDUs or d passed.
// It only looks for want's octets in the raw stream, which is enough for short payloads.
func (p *hostilePeer) echoed(want []byte, d time.Duration) bool {
	_ = p.c.SetReadDeadline(time.Now().Add(d))
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, want) {
		n, err := p.c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return false
		}
	}
	return true
}

// A case of hostile input: it gets a connection past the MPA Request and returns whether the
// server must end the connection (true) or may keep it (false: the input may be valid).
type hostileCase struct {
	name  string
	count int
	run   func(p *hostilePeer, rng *rand.Rand) (mustEnd bool, err error)
}

func mutate(rng *rand.Rand, b []byte) {
	for range 1 + rng.IntN(4) {
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
	}
}

var hostileCases = []hostileCase{
	{"garbage-instead-of-mpa", 40, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		g := make([]byte, 1+rng.IntN(4096))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		_, err := p.c.Write(g)
		return true, err
	}},
	{"mpa-reply-mutated", 40, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		f := mpaReply(true, true, helloAck(16, 65536))
		// Damage the key, flags, revision or the HelloAck's head, all of which are checked.
		idx := []int{0, 7, 15, 17, 20, 20 + 16}[rng.IntN(6)]
		f[idx] ^= 0x5a
		_, err := p.c.Write(f)
		return true, err
	}},
	{"mpa-reply-huge-private-data", 10, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		f := mpaReply(true, true, nil)
		binary.BigEndian.PutUint16(f[18:20], 0xffff)
		f = append(f, make([]byte, 4096)...)
		_, err := p.c.Write(f)
		return true, err
	}},
	{"valid-then-fuzzed-fpdus", 200, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		if err := p.reply(); err != nil {
			return false, err
		}
		for range 1 + rng.IntN(4) {
			payload := make([]byte, rng.IntN(2048))
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			u := p.dataULPDU(payload)
			mutate(rng, u)
			p.queue(u)
		}
		return false, p.flush()
	}},
	{"valid-then-raw-fpdu-mutation", 100, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		if err := p.reply(); err != nil {
			return false, err
		}
		p.queue(p.dataULPDU(make([]byte, 1+rng.IntN(3000))))
		mutate(rng, p.pending) // after framing: the CRC or the framing must catch it
		return true, p.flush()
	}},
	{"rdma-write-bad-stag", 30, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		if err := p.reply(); err != nil {
			return false, err
		}
		stag := []uint32{0, 0xffffffff, rng.Uint32(), 0x100}[rng.IntN(4)]
		p.queue(append(tagged(true, opRDMAWrite, stag, rng.Uint64()), make([]byte, 64)...))
		return true, p.flush()
	}},
	{"rdma-read-request-bad-stag", 30, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		if err := p.reply(); err != nil {
			return false, err
		}
		rr := make([]byte, readReqLen)
		binary.BigEndian.PutUint32(rr[0:4], rng.Uint32())      // sink STag
		binary.BigEndian.PutUint64(rr[4:12], rng.Uint64())     // sink TO
		binary.BigEndian.PutUint32(rr[12:16], 1<<31)           // RDMA Read size: huge
		binary.BigEndian.PutUint32(rr[16:20], rng.Uint32()|1)  // source STag: never registered
		binary.BigEndian.PutUint64(rr[20:28], ^uint64(0)-4096) // source TO: out of any bounds
		p.queue(append(untagged(true, opReadRequest, qnReadReq, 1, 0), rr...))
		return true, p.flush()
	}},
	{"rdma-read-response-stale-stag", 20, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		if err := p.reply(); err != nil {
			return false, err
		}
		p.queue(append(tagged(true, opReadResponse, rng.Uint32(), 0), make([]byte, 128)...))
		return true, p.flush()
	}},
	{"huge-ulpdu-length", 20, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		if err := p.reply(); err != nil {
			return false, err
		}
		// An FPDU that claims the largest lengths, sent whole: its markers and CRC cannot match.
		ulen := 0xfff0 + rng.IntN(16)
		u := make([]byte, ulen)
		for i := range u {
			u[i] = byte(rng.Uint32())
		}
		f := p.tx.fpdu(u)
		f[len(f)-1] ^= 0xff
		_, err := p.c.Write(f)
		return true, err
	}},
	{"huge-bsdh-length", 20, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		if err := p.reply(); err != nil {
			return false, err
		}
		u := p.dataULPDU(make([]byte, 100))
		binary.BigEndian.PutUint32(u[ddpUntaggedLen+4:], 0xffffff00|rng.Uint32()&0xff)
		p.queue(u)
		return true, p.flush()
	}},
	{"message-beyond-receive-buffer", 10, func(p *hostilePeer, rng *rand.Rand) (bool, error) {
		if err := p.reply(); err != nil {
			return false, err
		}
		// One SDP message in many DDP segments whose offsets run past the 64 KiB buffer.
		p.mseq++
		chunk := 1024
		for mo := 0; mo < 80*1024; mo += chunk {
			u := append(untagged(false, opSend, qnSend, p.mseq, uint32(mo)), make([]byte, chunk)...)
			if mo == 0 {
				copy(u[ddpUntaggedLen:], bsdh(midData, 16, 64*1024, p.mseq, 0))
			}
			p.queue(u)
		}
		return true, p.flush()
	}},
}

// startEcho starts a preloaded echo server for a raw peer: its application port and the
// address of its SDP port, once that listens.
func startEcho(t *testing.T, dir string, extra ...string) (srv *prog, port int, sdpAddr string) {
	t.Helper()
	srv = start(t, "echo", sdpEnv(dir, "server", extra...), relprog, "echo", freePort(t))
	port = srv.port(t)
	waitListening(t, sdpPort(port, 20000), 10*time.Second)
	return srv, port, fmt.Sprintf("127.0.0.1:%d", sdpPort(port, 20000))
}

// TestHostilePeers attacks a preloaded echo server on its SDP port with every hostile case
// while a preloaded client keeps using it.
func TestHostilePeers(t *testing.T) {
	dir := logDir(t)
	srv, p, sdpAddr := startEcho(t, dir)

	// A valid hostile-style peer is served: the harness itself speaks SDP well enough.
	hp, err := dialHostile(sdpAddr)
	require.NoError(t, err)
	require.NoError(t, hp.reply())
	hp.queue(hp.dataULPDU([]byte("a well-formed message from a peer without libsdp")))
	require.NoError(t, hp.flush())
	require.True(t, hp.echoed([]byte("a well-formed message from a peer without libsdp"), 10*time.Second),
		"the server echoes a well-formed message from the raw peer")
	hp.c.Close()

	// Warm up, then take the server's memory as the reference.
	warm := start(t, "warm", sdpEnv(dir, "client"), relprog, "echocli", "127.0.0.1", strconv.Itoa(p), "50")
	require.True(t, warm.wait(60*time.Second))
	require.NoError(t, warm.err, warm.output())
	rss0 := rssKiB(t, srv.pid())

	// The good client runs throughout the attack, in rounds.
	stop := make(chan struct{})
	var goodWG sync.WaitGroup
	goodRounds, goodFail := 0, ""
	goodWG.Add(1)
	go func() {
		defer goodWG.Done()
		for i := 0; i < 100; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c := start(t, fmt.Sprintf("good%d", i), sdpEnv(dir, "client"), relprog, "echocli", "127.0.0.1", strconv.Itoa(p), "20")
			if !c.wait(60*time.Second) || c.err != nil {
				goodFail = fmt.Sprintf("round %d: %v\n%s", i, c.err, c.output())
				return
			}
			goodRounds++
		}
	}()

	tried, ended := 0, 0
	perCase := map[string][2]int{} // tried, ended
	var failures []string
	for ci, hc := range hostileCases {
		rng := rand.New(rand.NewPCG(uint64(ci)+11, 7))
		var wg sync.WaitGroup
		var mu sync.Mutex
		sem := make(chan struct{}, 16)
		for i := range hc.count {
			wg.Add(1)
			sem <- struct{}{}
			r := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				hp, err := dialHostile(sdpAddr)
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s %d: %v", hc.name, i, err))
					mu.Unlock()
					return
				}
				defer hp.c.Close()
				mustEnd, err := hp.run(hc, r)
				wait := time.Second // valid input may keep the connection open
				if mustEnd {
					wait = 5 * time.Second
				}
				gone := hp.ended(wait)
				mu.Lock()
				defer mu.Unlock()
				tried++
				pc := perCase[hc.name]
				pc[0]++
				if gone {
					ended++
					pc[1]++
				}
				perCase[hc.name] = pc
				// A write the server refused (it already reset the connection) is fine.
				if mustEnd && !gone && err == nil {
					failures = append(failures, fmt.Sprintf("%s %d: the server kept the connection open", hc.name, i))
				}
			}()
		}
		wg.Wait()
		require.False(t, srv.exited(), "the server died during %s: %v\n%s", hc.name, srv.err, srv.output())
	}
	close(stop)
	goodWG.Wait()
	for _, hc := range hostileCases {
		t.Logf("%-32s tried %3d, ended by the server %3d", hc.name, perCase[hc.name][0], perCase[hc.name][1])
	}
	assert.Empty(t, failures)
	assert.Empty(t, goodFail, "the good client failed during the attack")
	assert.Positive(t, goodRounds, "the good client ran during the attack")

	// The server still serves, and its memory stayed bounded.
	after := start(t, "after", sdpEnv(dir, "client"), relprog, "echocli", "127.0.0.1", strconv.Itoa(p), "50")
	require.True(t, after.wait(60*time.Second))
	require.NoError(t, after.err, after.output())
	rss1 := rssKiB(t, srv.pid())
	t.Logf("hostile: %d connections tried, %d ended by the server; good client rounds %d; server RSS %d -> %d KiB",
		tried, ended, goodRounds, rss0, rss1)
	assert.Less(t, rss1-rss0, int64(64<<10), "server memory growth during the attack (KiB)")
	srv.stopGently(10 * time.Second)
	st := statsOf(t, dir, "server")
	t.Logf("server: sdp_conns=%d panics=%d", st["sdp_conns"], st["panics"])
	assert.Zero(t, st["panics"], "no engine panic on hostile input")
	fmt.Printf("RELIABILITY hostile tried=%d ended=%d good_rounds=%d rss_kib_before=%d rss_kib_after=%d\n",
		tried, ended, goodRounds, rss0, rss1)
}

func (p *hostilePeer) run(hc hostileCase, rng *rand.Rand) (bool, error) { return hc.run(p, rng) }

// TestHalfOpen holds connections on a preloaded server's SDP port that never finish the
// handshake (no MPA Reply) or stop in the middle of an FPDU, while a preloaded client keeps
// using the server. The server must keep serving with bounded memory and end every connection
// that never finished its handshake once its handshake timeout has passed.
func TestHalfOpen(t *testing.T) {
	dir := logDir(t)
	srv := start(t, "echo", sdpEnv(dir, "server", "SDP_HANDSHAKE_TIMEOUT=3000"), relprog, "echo", freePort(t))
	p := srv.port(t)
	sdpAddr := fmt.Sprintf("127.0.0.1:%d", sdpPort(p, 20000))
	waitListening(t, sdpPort(p, 20000), 10*time.Second)
	warm := start(t, "warm", sdpEnv(dir, "client"), relprog, "echocli", "127.0.0.1", strconv.Itoa(p), "20")
	require.True(t, warm.wait(60*time.Second))
	require.NoError(t, warm.err, warm.output())
	rss0, fds0 := rssKiB(t, srv.pid()), fdCount(t, srv.pid())

	const silent, stalled = 300, 100
	held := time.Now()
	var peers []*hostilePeer
	for i := range silent + stalled {
		hp, err := dialHostile(sdpAddr)
		require.NoError(t, err, "half-open connection %d", i)
		if i >= silent {
			require.NoError(t, hp.reply())
			f := hp.tx.fpdu(hp.dataULPDU(make([]byte, 4000)))
			_, err = hp.c.Write(f[:len(f)/2]) // half an FPDU, then nothing
			require.NoError(t, err)
		}
		peers = append(peers, hp)
	}
	t.Cleanup(func() {
		for _, hp := range peers {
			hp.c.Close()
		}
	})
	// The server serves a good client while they are held.
	good := start(t, "good", sdpEnv(dir, "client"), relprog, "echocli", "127.0.0.1", strconv.Itoa(p), "200")
	require.True(t, good.wait(60*time.Second))
	require.NoError(t, good.err, good.output())
	rss1, fds1 := rssKiB(t, srv.pid()), fdCount(t, srv.pid())

	// The server's handshake timeout (SDP_HANDSHAKE_TIMEOUT, 3 s here) must end every
	// connection whose peer never sent its MPA Reply. A stalled peer that finished the
	// handshake is an established connection: as with TCP, the server keeps it.
	ended := make([]bool, len(peers))
	check := func(from, to int) (n int) {
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			if ended[i] {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ended[i] = peers[i].ended(100 * time.Millisecond)
			}()
		}
		wg.Wait()
		for i := from; i < to; i++ {
			if ended[i] {
				n++
			}
		}
		return n
	}
	endedSilent := 0
	for deadline := time.Now().Add(30 * time.Second); endedSilent < silent && time.Now().Before(deadline); {
		endedSilent = check(0, silent)
	}
	heldFor := time.Since(held)
	endedStalled := check(silent, len(peers))
	t.Logf("half-open: %d silent and %d stalled held; after %.1f s the server had ended %d and %d; server RSS %d -> %d KiB, fds %d -> %d",
		silent, stalled, heldFor.Seconds(), endedSilent, endedStalled, rss0, rss1, fds0, fds1)
	fmt.Printf("RELIABILITY halfopen silent=%d stalled=%d ended_silent=%d ended_stalled=%d after_s=%.1f rss_kib=%d->%d fds=%d->%d\n",
		silent, stalled, endedSilent, endedStalled, heldFor.Seconds(), rss0, rss1, fds0, fds1)
	assert.Equal(t, silent, endedSilent, "every connection without an MPA Reply is ended by the handshake timeout")
	// Each held connection costs the server its socket, an eventfd and the engine's state
	// (about 70-90 KiB here); the bound catches a runaway, the figure is reported.
	assert.Less(t, rss1-rss0, int64((silent+stalled)*200), "server memory with the half-open connections held (KiB)")
	require.False(t, srv.exited())
}

// replyRing answers the MPA Request with a Reply that wants no markers (so that the server's
// FPDUs are plain to read) and a HelloAck choosing the rdma flow-control mode with a ring of
// our own, then reads the server's first FPDU, its ChRcvBuf: the size and STag of the ring the
// server registered for our RDMA Writes.
func (p *hostilePeer) replyRing() (size, stag uint32, err error) {
	if _, err = p.c.Write(mpaReply(false, true, helloAckRing(16, 65536, 0x4d3c2b00, 1<<20))); err != nil {
		return 0, 0, err
	}
	p.tx = &framer{markers: p.markers, crc: true}
	_ = p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var l [2]byte
	if _, err = io.ReadFull(p.c, l[:]); err != nil {
		return 0, 0, fmt.Errorf("reading the server's first FPDU: %w", err)
	}
	ulen := int(binary.BigEndian.Uint16(l[:]))
	rest := make([]byte, ulen+(4-(2+ulen)%4)%4+crcLen)
	if _, err = io.ReadFull(p.c, rest); err != nil {
		return 0, 0, fmt.Errorf("reading the server's first FPDU: %w", err)
	}
	if ulen < ddpUntaggedLen+bsdhLen+8 || rest[ddpUntaggedLen] != midChRcvBuf {
		return 0, 0, fmt.Errorf("the server's first FPDU is not a ChRcvBuf (%d octets, MID %#x)", ulen, rest[min(ddpUntaggedLen, len(rest)-1)])
	}
	b := rest[ddpUntaggedLen+bsdhLen:]
	return binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), nil
}

// ringWrite is an RDMA Write of n octets at offset to into the STag.
func ringWrite(stag uint32, to uint64, n int, fill byte) []byte {
	u := tagged(true, opRDMAWrite, stag, to)
	for range n {
		u = append(u, fill)
	}
	return u
}

func immData(n, ack uint32) (d [8]byte) {
	binary.BigEndian.PutUint32(d[:], n)
	binary.BigEndian.PutUint32(d[4:], ack)
	return d
}

// TestHostileRing attacks a preloaded echo server that uses the rdma flow-control mode, where
// the engine registers a receive ring for the peer's RDMA Writes and names it by STag: writes
// out of its bounds, with a wrong key, with an STag from an earlier connection, an RDMA Read
// of the write-only ring, and Immediate Data claiming more than was written. Each must end its
// connection; a preloaded client is served meanwhile; the server's memory stays bounded.
func TestHostileRing(t *testing.T) {
	dir := logDir(t)
	srv, p, sdpAddr := startEcho(t, dir, "SDP_FLOW_CONTROL=rdma")

	// A well-formed ring exchange is served: the echo comes back into our ring.
	hp, err := dialHostile(sdpAddr)
	require.NoError(t, err)
	size, stag, err := hp.replyRing()
	require.NoError(t, err)
	t.Logf("the server's ring: %d octets, STag %#x", size, stag)
	msg := []byte("a ring write from a peer without libsdp")
	hp.queue(append(tagged(true, opRDMAWrite, stag, 0), msg...))
	hp.queue(immediate(1, immData(uint32(len(msg)), 0)))
	require.NoError(t, hp.flush())
	require.True(t, hp.echoed(msg, 10*time.Second), "the server echoes a well-formed ring write")
	hp.c.Close()
	staleSTag := stag

	warm := start(t, "warm", sdpEnv(dir, "client", "SDP_FLOW_CONTROL=rdma"), relprog, "echocli", "127.0.0.1", strconv.Itoa(p), "20")
	require.True(t, warm.wait(60*time.Second))
	require.NoError(t, warm.err, warm.output())
	rss0 := rssKiB(t, srv.pid())

	type ringCase struct {
		name string
		make func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) // ULPDUs; false: skip
	}
	cases := []ringCase{
		{"write-past-the-end", func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) {
			return [][]byte{ringWrite(stag, uint64(size)-uint64(rng.IntN(64)), 256+rng.IntN(1024), 0xa5)}, true
		}},
		{"write-beyond-the-ring", func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) {
			return [][]byte{ringWrite(stag, uint64(size)+uint64(rng.IntN(1<<20)), 64, 0xa5)}, true
		}},
		{"write-offset-wraps", func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) {
			return [][]byte{ringWrite(stag, ^uint64(0)-uint64(rng.IntN(32)), 128, 0xa5)}, true
		}},
		{"write-wrong-key", func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) {
			return [][]byte{ringWrite(stag^uint32(1+rng.IntN(255)), 0, 64, 0xa5)}, true
		}},
		{"write-wrong-index", func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) {
			return [][]byte{ringWrite(stag+uint32(1+rng.IntN(1000))<<8, 0, 64, 0xa5)}, true
		}},
		{"write-stale-stag", func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) {
			if staleSTag == stag {
				return nil, false // STags are per connection: the old one names this ring too
			}
			return [][]byte{ringWrite(staleSTag, 0, 64, 0xa5)}, true
		}},
		{"read-of-the-write-only-ring", func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) {
			rr := make([]byte, readReqLen)
			binary.BigEndian.PutUint32(rr[0:4], 0x4d3c2b00)
			binary.BigEndian.PutUint32(rr[12:16], 4096)
			binary.BigEndian.PutUint32(rr[16:20], stag)
			return [][]byte{append(untagged(true, opReadRequest, qnReadReq, 1, 0), rr...)}, true
		}},
		{"immediate-claims-more-than-the-ring", func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) {
			return [][]byte{ringWrite(stag, 0, 100, 0x11), immediate(1, immData(size+uint32(1+rng.IntN(4096)), 0))}, true
		}},
		{"immediate-acks-unsent-bytes", func(size, stag uint32, rng *rand.Rand) ([][]byte, bool) {
			return [][]byte{immediate(1, immData(0, uint32(1+rng.IntN(1<<20))))}, true
		}},
	}
	tried, ended, skipped := 0, 0, 0
	reasons := map[string]int{}
	var failures []string
	for ci, rc := range cases {
		rng := rand.New(rand.NewPCG(uint64(ci)+101, 3))
		for i := range 10 {
			hp, err := dialHostile(sdpAddr)
			require.NoError(t, err, "%s %d", rc.name, i)
			size, stag, err := hp.replyRing()
			require.NoError(t, err, "%s %d", rc.name, i)
			us, ok := rc.make(size, stag, rng)
			if !ok {
				skipped++
				hp.c.Close()
				continue
			}
			for _, u := range us {
				hp.queue(u)
			}
			werr := hp.flush()
			tried++
			if hp.ended(5 * time.Second) {
				ended++
			} else if werr == nil {
				failures = append(failures, fmt.Sprintf("%s %d: the server kept the connection open", rc.name, i))
			}
			hp.c.Close()
			require.False(t, srv.exited(), "the server died during %s: %v\n%s", rc.name, srv.err, srv.output())
		}
	}
	assert.Empty(t, failures)
	after := start(t, "after", sdpEnv(dir, "client", "SDP_FLOW_CONTROL=rdma"), relprog, "echocli", "127.0.0.1", strconv.Itoa(p), "50")
	require.True(t, after.wait(60*time.Second))
	require.NoError(t, after.err, after.output())
	rss1 := rssKiB(t, srv.pid())
	srv.stopGently(10 * time.Second)
	st := statsOf(t, dir, "server")
	assert.Zero(t, st["panics"], "no engine panic")
	assert.Less(t, rss1-rss0, int64(64<<10), "server memory growth (KiB)")
	for _, l := range srv.matching(regexp.MustCompile(`^CLOSED `)) {
		reasons[l]++
	}
	logged := strings.Count(logText(t, dir, "server"), "connection ended")
	assert.Equal(t, ended, logged, "each connection the server ended is logged once with its reason")
	for r, n := range reasons {
		t.Logf("%3d× %s", n, r)
	}
	t.Logf("ring attacks: %d tried, %d ended by the server, %d skipped, %d logged with their reason; server RSS %d -> %d KiB", tried, ended, skipped, logged, rss0, rss1)
	fmt.Printf("RELIABILITY ring tried=%d ended=%d skipped=%d\n", tried, ended, skipped)
}
