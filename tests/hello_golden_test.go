package tests

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"libsdp/internal/settings"
	"libsdp/iwarp"
	"libsdp/sdpcore"
)

// The Hello is written twice: by the shim in C (build_request, the bytes every accepted SDP
// connection starts with) and by sdpcore.AppendRequest, the reference encoder the engine's
// tests use. TestHelloGolden holds the two to the same bytes: a preloaded listener accepts a
// plain connection to its SDP port, and what the shim writes there must equal, byte for byte,
// what AppendRequest encodes from the case's own settings and the connection's addresses, and
// parse back (iwarp.ParseMPAFrame, sdpcore.ParseHello) to the same fields.

// helloCase is a listener's settings and how the test reaches it.
type helloCase struct {
	name    string
	env     []string
	listen  string // the address the listener binds
	dial    string // the address the test connects to
	markers bool
	crc     bool
	fc      sdpcore.FlowControl
	bufSize int
	bufs    int
	zcopy   bool  // SDP_ZCOPY_THRESHOLD above 0: the Write ZCopy capability
	shm     bool  // SDP_SHM=1: the shared-memory capability
	ipv     uint8 // 4 or 6
	// waitLog: the server's log must show this before the server is stopped.
	waitLog string
}

// acceptingServer binds host:port, accepts connections and keeps them open until stopped.
const acceptingServer = `
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
s = socket.socket(fam)
if fam == socket.AF_INET6:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind((host, port))
s.listen(8)
held = []
try:
    while True:
        c = s.accept()[0]
        held.append(c)
        c.setblocking(False)
        try:
            c.recv(1)  # hands the connection to the engine, which starts (and logs its settings)
        except BlockingIOError:
            pass
except KeyboardInterrupt:
    pass
`

func TestHelloGolden(t *testing.T) {
	shim, ctx := setup(t)
	def := helloCase{markers: true, crc: true, fc: sdpcore.DefaultFlowControl, bufSize: 64 << 10, bufs: 16,
		listen: "127.0.0.1", dial: "127.0.0.1", ipv: 4, shm: settings.SharedMemory.Default == "1"}
	with := func(name string, f func(c *helloCase)) helloCase {
		c := def
		c.name = name
		f(&c)
		return c
	}
	cases := []helloCase{
		with("ipv4-defaults", func(*helloCase) {}),
		with("ipv6", func(c *helloCase) { c.listen, c.dial, c.ipv = "::1", "::1", 6 }),
		with("ipv4-mapped", func(c *helloCase) { c.listen, c.dial, c.ipv = "::", "127.0.0.1", 4 }),
		with("no-markers", func(c *helloCase) { c.env, c.markers = []string{"SDP_MARKERS=0"}, false }),
		with("no-crc", func(c *helloCase) { c.env, c.crc = []string{"SDP_CRC=0"}, false }),
		with("neither", func(c *helloCase) {
			c.env, c.markers, c.crc = []string{"SDP_MARKERS=0", "SDP_CRC=0"}, false, false
		}),
		with("credit", func(c *helloCase) { c.env, c.fc = []string{"SDP_FLOW_CONTROL=credit"}, sdpcore.FlowCredit }),
		with("rdma", func(c *helloCase) { c.env, c.fc = []string{"SDP_FLOW_CONTROL=rdma"}, sdpcore.FlowRDMA }),
		with("nic", func(c *helloCase) { c.env, c.fc = []string{"SDP_FLOW_CONTROL=nic"}, sdpcore.FlowNIC }),
		with("transport", func(c *helloCase) {
			c.env, c.fc = []string{"SDP_FLOW_CONTROL=transport"}, sdpcore.FlowTransport
		}),
		with("buffers", func(c *helloCase) {
			c.env, c.bufSize, c.bufs = []string{"SDP_BUF_SIZE=16384", "SDP_RECV_BUFS=64"}, 16384, 64
		}),
		with("zcopy", func(c *helloCase) { c.env, c.zcopy = []string{"SDP_ZCOPY_THRESHOLD=32768"}, true }),
		with("zcopy-spaces", func(c *helloCase) { c.env, c.zcopy = []string{"SDP_ZCOPY_THRESHOLD= 65536 "}, true }),
		with("shm", func(c *helloCase) { c.env, c.shm = []string{"SDP_SHM=1"}, true }),
		with("shm-off", func(c *helloCase) { c.env, c.shm = []string{"SDP_SHM=off"}, false }),
		with("no-zcopy", func(c *helloCase) { c.env, c.zcopy = []string{"SDP_ZCOPY_THRESHOLD=0"}, false }),
		// Not a byte count: both the shim and the engine take the default (zero copy off).
		with("zcopy-64k", func(c *helloCase) { c.env = []string{"SDP_ZCOPY_THRESHOLD=64k"} }),
		with("zcopy-negative", func(c *helloCase) { c.env = []string{"SDP_ZCOPY_THRESHOLD=-1"} }),
	}
	for _, hc := range cases {
		t.Run(hc.name, func(t *testing.T) {
			got, want, h := helloExchange(ctx, t, shim, t.TempDir(), hc)
			assert.Equal(t, want, got, "the shim's MPA Request and Hello (got) against sdpcore.AppendRequest (want)")
			f, n, err := iwarp.ParseMPAFrame(got, false)
			require.NoError(t, err)
			require.Equal(t, len(got), n)
			// Every case connects from this host: with shared memory allowed, neither.
			assert.Equal(t, hc.markers && !hc.shm, f.Markers, "M flag")
			assert.Equal(t, hc.crc && !hc.shm, f.CRC, "C flag")
			assert.EqualValues(t, 1, f.Rev, "MPA revision")
			p, err := sdpcore.ParseHello(f.PrivateData)
			require.NoError(t, err)
			assert.Equal(t, h, p, "the Hello parsed back, field by field")
		})
	}
}

// helloExchange starts a preloaded listener with hc's settings, connects plainly to its SDP
// port and returns the bytes the shim wrote there, the bytes AppendRequest encodes for the
// same settings and addresses, and the Hello those say.
func helloExchange(ctx context.Context, t *testing.T, shim, dir string, hc helloCase) (got, want []byte, h sdpcore.Hello) {
	t.Helper()
	port := freePort(t)
	env := append(sdpEnv(shim, filepath.Join(dir, "hello.%p.log")), hc.env...) // exec keeps the last of a name
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	p := startPython(cctx, t, "hello server", env, filepath.Join(dir, "server.out"), "-c", acceptingServer,
		hc.listen, strconv.Itoa(port))
	defer p.stop() // before the log is read
	p.waitListening(cctx, t, port, sdpPort(port))

	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(cctx, "tcp", net.JoinHostPort(hc.dial, strconv.Itoa(sdpPort(port))))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	got = make([]byte, iwarp.MPAHeaderLen)
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err, "the MPA Request's header; server log:\n%s", logs(dir))
	pd := int(got[18])<<8 | int(got[19])
	got = append(got, make([]byte, pd)...)
	_, err = io.ReadFull(conn, got[iwarp.MPAHeaderLen:])
	require.NoError(t, err, "the MPA Request's private data")

	if hc.waitLog != "" {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for !strings.Contains(logs(dir), hc.waitLog) {
			select {
			case <-cctx.Done():
				t.Fatalf("no %q in the server's log:\n%s", hc.waitLog, logs(dir))
			case <-tick.C:
			}
		}
	}

	// From the server's side: it is the source, the test the destination.
	src, dst := conn.RemoteAddr(), conn.LocalAddr()
	h = sdpcore.Hello{Bufs: uint16(hc.bufs), MaxAdverts: 1, IPVersion: hc.ipv, DesRemRcvSz: uint32(hc.bufSize),
		LocalRcvSz: uint32(hc.bufSize), LocalPort: uint16(port), FlowControl: hc.fc}
	h.SrcIP, h.DstIP = helloIP(src, hc.listen), helloIP(dst, hc.listen)
	cfg := sdpcore.DefaultConfig()
	cfg.Markers, cfg.CRC = hc.markers, hc.crc
	cfg.ZCopyThreshold = 0
	if hc.zcopy {
		cfg.ZCopyThreshold = 1 // any threshold above 0 offers Write ZCopy
	}
	cfg.SameHost = hc.shm
	want = sdpcore.AppendRequest(nil, cfg, &h)
	if hc.zcopy {
		h.Cap |= sdpcore.CapWriteZCopy
	}
	if hc.shm {
		h.Cap |= sdpcore.CapSameHost
	}
	return got, want, h
}

// helloIP is an address as the shim puts it in the Hello: an IPv4 socket's address in the
// last 4 bytes (the rest 0); an IPv6 socket's whole, v4-mapped ones included.
func helloIP(a net.Addr, listen string) (b [16]byte) {
	ip := a.(*net.TCPAddr).IP
	if net.ParseIP(listen).To4() != nil {
		copy(b[12:], ip.To4())
		return b
	}
	copy(b[:], ip.To16())
	return b
}
