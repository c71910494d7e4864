package reliability

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A peer without libsdp that takes a preloaded server's shared-memory offer (docs/PROTOCOL.md,
// "Same host"), written from the protocol's description rather than with package shm, and then
// writes into the region what a broken or hostile peer could: impossible positions, record
// lengths past the ring, garbage records, scribbled flags. The region is the peer's to write,
// so each of those may cost the connection and nothing else.

// The ring layout: a control page (the producer's position, the consumer's position, the
// consumer's sleep flag and the producer's wanted room, uint64 each on its own cache line),
// then a power-of-two data area of records (uint64 little-endian length, payload, padded to 8).
const (
	shmControl  = 4096
	shmOffHead  = 64
	shmOffTail  = 128
	shmOffSleep = 192
	shmOffWant  = 256
	shmBell     = 0xdb
	helloCapShm = 0x08

	// fpduMax is more than the longest FPDU with markers takes: octets that complete
	// whatever length a damaged header claims, so the damage is seen, not waited on.
	fpduMax = 70000
)

// shmRing is one ring of the region as the raw peer sees it.
type shmRing struct{ mem []byte }

func (r shmRing) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }
func (r shmRing) data() []byte         { return r.mem[shmControl:] }
func (r shmRing) mask() uint64         { return uint64(len(r.mem)-shmControl) - 1 }

// put copies b into the data area at position at, wrapping around its end.
func (r shmRing) put(at uint64, b []byte) {
	d := r.data()
	i := at & r.mask()
	n := copy(d[i:], b)
	copy(d, b[n:])
}

// shmPeer is a hostile peer that took the server's region.
type shmPeer struct {
	*hostilePeer
	region  []byte
	memfd   int
	data    int
	in, out shmRing // the server's ring (it produces) and ours
	head    uint64  // what we published on tx
	tail    uint64  // what we consumed of rx
	got     []byte  // the payload read from rx
}

// helloAckShm is a HelloAck in the credit mode offering shared memory at the rendezvous name.
func helloAckShm(bufs uint16, rcvSz uint32, name [16]byte) []byte {
	b := bsdh(midHelloAck, bufs, bsdhLen+32, 0, 0)
	hah := make([]byte, 32)
	hah[0] = 0x11
	hah[1] = 4<<4 | helloCapShm
	hah[2] = 0x80
	binary.BigEndian.PutUint32(hah[4:], rcvSz)
	copy(hah[16:], name[:])
	return append(b, hah...)
}

// dialShm connects to the SDP port, offers shared memory in its HelloAck and takes the region
// the server hands over: the server's doorbell octet on the TCP socket, then one memfd of two
// rings by SCM_RIGHTS on the rendezvous.
func dialShm(addr string) (*shmPeer, error) {
	hp, err := dialHostile(addr)
	if err != nil {
		return nil, err
	}
	p := &shmPeer{hostilePeer: hp, memfd: -1}
	if err := p.take(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *shmPeer) take() error {
	if len(p.hello) < 18 || p.hello[17]&helloCapShm == 0 {
		return fmt.Errorf("the server's Hello does not allow shared memory (% x)", p.hello[:min(len(p.hello), 18)])
	}
	var name [16]byte
	for i := range name {
		name[i] = byte(rand.Uint32())
	}
	ln, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrUnix{Name: "@libsdp-" + hex.EncodeToString(name[:])}); err != nil {
		return err
	}
	if err := unix.Listen(ln, 1); err != nil {
		return err
	}
	if _, err := p.c.Write(mpaReply(false, true, helloAckShm(16, 65536, name))); err != nil {
		return err
	}
	p.tx = &framer{markers: p.markers, crc: true}
	var choice [1]byte
	_ = p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(p.c, choice[:]); err != nil {
		return fmt.Errorf("reading the server's choice: %w", err)
	}
	if choice[0] != shmBell {
		return fmt.Errorf("the server chose TCP (first octet %#x)", choice[0])
	}
	pfd := []unix.PollFd{{Fd: int32(ln), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 5000); n != 1 {
		return fmt.Errorf("the server did not come to the rendezvous: %v", err)
	}
	c, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(c)
	var msg [8]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(c, msg[:], oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || n != 4 {
		return fmt.Errorf("receiving the region: %d octets, %v", n, err)
	}
	cms, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cms) != 1 {
		return fmt.Errorf("the region's control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&cms[0])
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("the region's descriptor: %v", err)
	}
	p.memfd = fds[0]
	p.data = int(binary.LittleEndian.Uint32(msg[:]))
	size := 2 * (shmControl + p.data)
	if p.region, err = unix.Mmap(p.memfd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return err
	}
	p.in = shmRing{p.region[:size/2]}
	p.out = shmRing{p.region[size/2:]}
	return nil
}

func (p *shmPeer) close() {
	if p.region != nil {
		_ = unix.Munmap(p.region)
		p.region = nil
	}
	if p.memfd >= 0 {
		unix.Close(p.memfd)
		p.memfd = -1
	}
	p.c.Close()
}

// bell writes one doorbell octet on the TCP socket.
func (p *shmPeer) bell() error {
	_, err := p.c.Write([]byte{shmBell})
	return err
}

// record writes one record of payload into our ring (unpublished).
func (p *shmPeer) record(payload []byte) {
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(payload)))
	p.out.put(p.head, hdr[:])
	p.out.put(p.head+8, payload)
	p.head += (8 + uint64(len(payload)) + 7) &^ 7
}

// publish stores our position and rings: always, as a peer that ignores the sleep flag may.
func (p *shmPeer) publish() error {
	atomic.StoreUint64(p.out.word(shmOffHead), p.head)
	return p.bell()
}

// sendFPDUs publishes the queued FPDUs as one record.
func (p *shmPeer) sendFPDUs() error {
	p.record(p.pending)
	p.pending = p.pending[:0]
	return p.publish()
}

// echoedShm reads the server's ring (checking nothing: we are the test, not the server)
// until want has arrived in its payload or d passed. Found empty, it says it sleeps (the
// consumer's flag) and waits for the server's doorbell on the socket, as a consumer does.
func (p *shmPeer) echoedShm(want []byte, d time.Duration) bool {
	_ = p.c.SetReadDeadline(time.Now().Add(d))
	var bells [64]byte
	for range 10000 {
		for h := atomic.LoadUint64(p.in.word(shmOffHead)); p.tail < h; {
			var hdr [8]byte
			p.readAt(p.tail, hdr[:])
			n := binary.LittleEndian.Uint64(hdr[:])
			if n > uint64(p.data) {
				return false
			}
			b := make([]byte, n)
			p.readAt(p.tail+8, b)
			p.got = append(p.got, b...)
			p.tail += (8 + n + 7) &^ 7
		}
		atomic.StoreUint64(p.in.word(shmOffTail), p.tail)
		if bytes.Contains(p.got, want) {
			return true
		}
		atomic.StoreUint64(p.in.word(shmOffSleep), 1)
		if atomic.LoadUint64(p.in.word(shmOffHead)) != p.tail {
			continue // published meanwhile
		}
		if _, err := p.c.Read(bells[:]); err != nil {
			return false // the deadline, or the server ended the connection
		}
	}
	return false
}

// echo sends m in one Data message through the ring and waits for the server's echo.
func (p *shmPeer) echo(m []byte) error {
	p.queue(p.dataULPDU(m))
	if err := p.sendFPDUs(); err != nil {
		return err
	}
	if !p.echoedShm(m, 10*time.Second) {
		return fmt.Errorf("no echo of %q", m)
	}
	return nil
}

func (p *shmPeer) readAt(at uint64, b []byte) {
	d := p.in.data()
	i := at & p.in.mask()
	n := copy(b, d[i:])
	copy(b[n:], d)
}

// TestHostileSharedMemory attacks a preloaded echo server through the shared memory it hands
// to a peer that offers it: positions past the ring, backwards or misaligned, record lengths
// past what was published, garbage records, the server's own ring's consumer position moved
// past what it published. Each must end that connection and only it; scribbled sleep and
// wait flags may cost wake-ups but not the service; the region cannot be resized; a preloaded
// client is served over shared memory before and after, and the server's memory stays bounded.
func TestHostileSharedMemory(t *testing.T) {
	dir := logDir(t)
	srv, port, sdpAddr := startEcho(t, dir)

	// A well-formed exchange is served through the rings.
	p, err := dialShm(sdpAddr)
	require.NoError(t, err)
	t.Logf("the server's region: two rings of %d data octets", p.data)
	assert.ErrorIs(t, unix.Ftruncate(p.memfd, int64(shmControl)), unix.EPERM, "the region is sealed against shrinking")
	assert.ErrorIs(t, unix.Ftruncate(p.memfd, int64(4*len(p.region))), unix.EPERM, "the region is sealed against growing")
	require.NoError(t, p.echo([]byte("a ring record from a peer without libsdp")), "the server echoes through its ring")
	p.close()

	warm := start(t, "warm", sdpEnv(dir, "client"), relprog, "echocli", "127.0.0.1", strconv.Itoa(port), "20")
	require.True(t, warm.wait(60*time.Second))
	require.NoError(t, warm.err, warm.output())
	rss0 := rssKiB(t, srv.pid())

	// Each case gets a connection with the region taken and attacks it; mustEnd: the server
	// must end the connection; otherwise it must go on serving it.
	type shmCase struct {
		name    string
		mustEnd bool
		attack  func(p *shmPeer, rng *rand.Rand) error
	}
	cases := []shmCase{
		{"head-past-the-ring", true, func(p *shmPeer, rng *rand.Rand) error {
			p.head = uint64(p.data) + 8*uint64(1+rng.IntN(1<<16))
			return p.publish()
		}},
		{"head-misaligned", true, func(p *shmPeer, rng *rand.Rand) error {
			p.head = 8*uint64(rng.IntN(64)) + uint64(1+rng.IntN(7))
			return p.publish()
		}},
		{"record-longer-than-published", true, func(p *shmPeer, rng *rand.Rand) error {
			p.record(make([]byte, 8))
			binary.LittleEndian.PutUint64(p.out.data(), 17+uint64(rng.IntN(p.data)))
			return p.publish()
		}},
		{"record-length-past-the-ring", true, func(p *shmPeer, rng *rand.Rand) error {
			p.record(make([]byte, 24))
			binary.LittleEndian.PutUint64(p.out.data(), uint64(p.data)<<uint(rng.IntN(20))|1<<63)
			return p.publish()
		}},
		{"head-backwards", true, func(p *shmPeer, rng *rand.Rand) error {
			if err := p.echo([]byte("before the head goes back")); err != nil {
				return err
			}
			p.head -= 8 * uint64(1+rng.IntN(int(p.head/8)))
			return p.publish()
		}},
		{"garbage-record", true, func(p *shmPeer, rng *rand.Rand) error {
			g := make([]byte, 1+rng.IntN(4096))
			for i := range g {
				g[i] = byte(rng.Uint32())
			}
			p.record(append(g, make([]byte, fpduMax)...)) // whatever length it claims, complete
			return p.publish()
		}},
		{"fpdu-mutated-in-the-ring", true, func(p *shmPeer, rng *rand.Rand) error {
			p.queue(p.dataULPDU(make([]byte, 1+rng.IntN(3000))))
			mutate(rng, p.pending)                                  // after framing: the CRC or the framing must catch it
			p.pending = append(p.pending, make([]byte, fpduMax)...) // a longer length is completed
			return p.sendFPDUs()
		}},
		{"servers-tail-past-its-head", true, func(p *shmPeer, rng *rand.Rand) error {
			atomic.StoreUint64(p.in.word(shmOffTail), uint64(p.data)+uint64(rng.Uint32()))
			p.queue(p.dataULPDU([]byte("the echo finds its ring consumed beyond what it wrote")))
			return p.sendFPDUs()
		}},
		{"flags-scribbled", false, func(p *shmPeer, rng *rand.Rand) error {
			for _, w := range []*uint64{p.in.word(shmOffSleep), p.in.word(shmOffWant), p.out.word(shmOffSleep), p.out.word(shmOffWant)} {
				atomic.StoreUint64(w, rng.Uint64())
			}
			return p.echo([]byte("served despite scribbled flags"))
		}},
	}
	const perCase = 8    // connections per case
	const ringBreaks = 6 // the cases up to head-backwards, and servers-tail-past-its-head
	tried, ended := 0, 0
	var failures []string
	for ci, sc := range cases {
		rng := rand.New(rand.NewPCG(uint64(ci)+211, 5))
		for i := range perCase {
			p, err := dialShm(sdpAddr)
			require.NoError(t, err, "%s %d", sc.name, i)
			aerr := sc.attack(p, rng)
			tried++
			switch {
			case sc.mustEnd:
				if p.ended(5 * time.Second) {
					ended++
				} else if aerr == nil {
					failures = append(failures, fmt.Sprintf("%s %d: the server kept the connection open", sc.name, i))
				}
			case aerr != nil:
				failures = append(failures, fmt.Sprintf("%s %d: %v", sc.name, i, aerr))
			}
			p.close()
			require.False(t, srv.exited(), "the server died during %s: %v\n%s", sc.name, srv.err, srv.output())
		}
	}
	assert.Empty(t, failures)

	after := start(t, "after", sdpEnv(dir, "client"), relprog, "echocli", "127.0.0.1", strconv.Itoa(port), "50")
	require.True(t, after.wait(60*time.Second))
	require.NoError(t, after.err, after.output())
	rss1 := rssKiB(t, srv.pid())
	srv.stopGently(10 * time.Second)
	st := statsOf(t, dir, "server")
	assert.Zero(t, st["panics"], "no engine panic")
	// Each preloaded client offers shared memory on its first 4 connections; its later ones, as
	// short, stay on iWARP (docs/PROTOCOL.md, "Same host"). Those 8 are enough to show that
	// the server still takes regions after the attacks.
	assert.GreaterOrEqual(t, st["shm_conns"], int64(1+tried+2*4),
		"every hostile connection and each preloaded client's first 4 took shared memory")
	assert.Less(t, rss1-rss0, int64(64<<10), "server memory growth (KiB)")
	// Each ended connection is one warning naming why; the broken rings among them.
	reasons := map[string]int{}
	numbers := regexp.MustCompile(`0x[0-9a-f]+|[0-9]+`)
	for _, m := range regexp.MustCompile(`connection ended: (.*)`).FindAllStringSubmatch(logText(t, dir, "server"), -1) {
		reasons[numbers.ReplaceAllString(m[1], "N")]++
	}
	logged, total := 0, 0
	for r, n := range reasons {
		t.Logf("%3d× %s", n, r)
		total += n
		if strings.Contains(r, "corrupted the ring") {
			logged += n
		}
	}
	assert.Equal(t, ended, total, "each connection the server ended is logged once with its reason")
	assert.Equal(t, ringBreaks*perCase, logged, "the attacks on positions and record headers are named as a broken ring")
	t.Logf("shared-memory attacks: %d tried, %d ended by the server (%d logged as a broken ring); server RSS %d -> %d KiB",
		tried, ended, logged, rss0, rss1)
	fmt.Printf("RELIABILITY shm tried=%d ended=%d corrupt_logged=%d\n", tried, ended, logged)
}
