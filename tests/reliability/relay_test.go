package reliability

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The relay sits between a preloaded client and a preloaded server's SDP port. It forwards the
// MPA Request and Reply untouched, follows the client's FPDU stream (markers every 512 octets
// from the first octet after the Reply, ULPDU_Length, payload and pad, CRC) and damages it once
// per connection, at the first octet of the chosen kind past a random offset.

type damage int

const (
	damageBit    damage = iota // one bit of any octet (header, payload, pad, marker or CRC)
	damageLength               // the low octet of an FPDU's ULPDU_Length
	damageMarker               // the FPDUPTR of a marker
	damageCRC                  // an octet of an FPDU's CRC
	damageReset                // no damage: both ends get a TCP reset
	delayRequest               // no damage: the MPA Request reaches the client 3 s late
)

func (d damage) String() string {
	return [...]string{"bit", "length", "marker", "crc", "reset", "delay"}[d]
}

const markerSpacing = 512

// injection is what the relay did to one connection.
type injection struct {
	kind   damage
	done   bool
	offset int64 // octet of the client's FPDU stream that was changed (or where it was reset)
}

type relay struct {
	t      *testing.T
	ln     *net.TCPListener
	target string
	kind   damage
	// from, to: the damage goes at the first suitable octet at or after an offset drawn from
	// [from, to) of the FPDU stream.
	from, to int64
	rng      *rand.Rand

	mu    sync.Mutex
	injs  []*injection
	wg    sync.WaitGroup
	conns []net.Conn
}

func newRelay(t *testing.T, target string, kind damage, from, to int64, seed uint64) *relay {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	markTwin(t, ln, relprogBacklog)
	r := &relay{t: t, ln: ln, target: target, kind: kind, from: from, to: to, rng: rand.New(rand.NewPCG(seed, 1))}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(r.close)
	return r
}

// relprogBacklog is the backlog relprog's listener asks for (relprog.c).
const relprogBacklog = 4096

// markTwin gives ln the backlog of the SDP listener that libsdp opens beside a listener with
// appBacklog (shim/trust.c: one less than the kernel's effective value), so that a preloaded
// client whose SDP port is ln takes it for that listener's twin: ln stands in the middle of an
// SDP connection of the test's own user.
func markTwin(t *testing.T, ln *net.TCPListener, appBacklog int) {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	require.NoError(t, err)
	maxBacklog, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	eff := min(appBacklog, maxBacklog)
	twin := eff - 1
	if eff == 0 {
		twin = 1
	}
	rc, err := ln.SyscallConn()
	require.NoError(t, err)
	var lerr error
	require.NoError(t, rc.Control(func(fd uintptr) { lerr = unix.Listen(int(fd), twin) }))
	require.NoError(t, lerr)
}

func (r *relay) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// injections returns what was done, connection by connection.
func (r *relay) injections() []injection {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]injection, len(r.injs))
	for i, in := range r.injs {
		out[i] = *in
	}
	return out
}

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.AcceptTCP()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp4", r.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		in := &injection{kind: r.kind}
		r.injs = append(r.injs, in)
		r.conns = append(r.conns, c, s)
		at := r.from + r.rng.Int64N(r.to-r.from)
		x := byte(1 + r.rng.IntN(255))
		bit := byte(1) << r.rng.IntN(8)
		r.mu.Unlock()
		flags := make(chan byte, 1)
		r.wg.Add(2)
		delay := time.Duration(0)
		if r.kind == delayRequest {
			delay = 3 * time.Second
		}
		go func() {
			defer r.wg.Done()
			requestFlags(s, c, flags, delay)
		}()
		go func() {
			defer r.wg.Done()
			r.clientToServer(c, s.(*net.TCPConn), in, at, x, bit, flags)
		}()
	}
}

// requestFlags forwards the server's stream to the client, reporting the flags of its MPA
// Request (the first 20 octets) on flags.
func requestFlags(s, c net.Conn, flags chan<- byte, delay time.Duration) {
	defer c.(*net.TCPConn).CloseWrite()
	hdr := make([]byte, 20)
	if _, err := io.ReadFull(s, hdr); err != nil {
		close(flags)
		return
	}
	time.Sleep(delay) // a slow network, as seen by the client (zero: none)
	flags <- hdr[16]
	if _, err := c.Write(hdr); err != nil {
		return
	}
	_, _ = io.Copy(c, s)
}

// Where an octet of the client's FPDU stream belongs.
const (
	inLenHi = iota
	inLenLo
	inBody
	inCRC
)

func (r *relay) clientToServer(c *net.TCPConn, s *net.TCPConn, in *injection, at int64, x, bit byte, flags <-chan byte) {
	defer s.CloseWrite()
	// The Reply: 20 octets and its private data, forwarded as they are.
	hdr := make([]byte, 20)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return
	}
	pd := make([]byte, binary.BigEndian.Uint16(hdr[18:20]))
	if _, err := io.ReadFull(c, pd); err != nil {
		return
	}
	if _, err := s.Write(append(hdr, pd...)); err != nil {
		return
	}
	reqFlags, ok := <-flags
	if !ok {
		return
	}
	// M in the Request: the server wants markers from the client. C in either: CRC.
	markers := reqFlags&0x80 != 0
	crc := reqFlags&0x40 != 0 || hdr[16]&0x40 != 0

	var pos int64
	state, ulen, left := inLenHi, 0, 0
	buf := make([]byte, 64*1024)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			for i := 0; i < n && !in.done; i++ {
				p := pos + int64(i)
				if markers && p%markerSpacing < 4 {
					if r.kind == damageMarker && p >= at && p%markerSpacing == 3 {
						r.hit(in, p, &buf[i], x)
					} else if r.kind == damageBit && p >= at {
						r.hit(in, p, &buf[i], bit)
					}
					continue
				}
				b := buf[i]
				cur := state
				switch state {
				case inLenHi:
					ulen, state = int(b)<<8, inLenLo
				case inLenLo:
					ulen |= int(b)
					left = ulen + (4-(2+ulen)%4)%4
					state = inBody
					if left == 0 {
						state, left = r.afterBody(crc)
					}
				case inBody:
					left--
					if left == 0 {
						state, left = r.afterBody(crc)
					}
				case inCRC:
					left--
					if left == 0 {
						state = inLenHi
					}
				}
				if p < at {
					continue
				}
				switch {
				case r.kind == damageBit,
					r.kind == damageLength && cur == inLenLo,
					r.kind == damageCRC && cur == inCRC:
					v := x
					if r.kind == damageBit {
						v = bit
					}
					r.hit(in, p, &buf[i], v)
				case r.kind == damageReset:
					r.mu.Lock()
					in.done, in.offset = true, p
					r.mu.Unlock()
					_ = c.SetLinger(0)
					_ = s.SetLinger(0)
					c.Close()
					s.Close()
					return
				}
			}
			pos += int64(n)
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *relay) afterBody(crc bool) (int, int) {
	if crc {
		return inCRC, 4
	}
	return inLenHi, 0
}

func (r *relay) hit(in *injection, p int64, b *byte, x byte) {
	*b ^= x
	r.mu.Lock()
	in.done, in.offset = true, p
	r.mu.Unlock()
}
