package iwarp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// negotiatedPair connects two QPs with a real MPANegotiation exchange over
// loopback TCP and starts Full Operation with what it settled, the MULPDU
// taken from the socket's MSS.
func negotiatedPair(t *testing.T, ic, rc MPAConfig) (a, b *peer, ir, rr MPAResult) {
	t.Helper()
	cfd, afd := tcpPair(t)
	a, b = &peer{qp: NewQP(afd)}, &peer{qp: NewQP(cfd)}
	ini, err := NewMPAInitiator(ic)
	require.NoError(t, err)
	res, err := NewMPAResponder(rc)
	require.NoError(t, err)
	a.qp.WriteRaw(ini.Out())
	a.flushAll(t)
	feed(t, b, res)
	b.qp.WriteRaw(res.Out())
	b.flushAll(t)
	feed(t, a, ini)
	ir, _ = ini.Result()
	rr, _ = res.Result()
	a.qp.SetReadLimits(ir.IRD, ir.ORD)
	b.qp.SetReadLimits(rr.IRD, rr.ORD)
	a.qp.StartFullOperation(ir.TxMarkers, ir.RxMarkers, ir.CRC, 0, 0)
	b.qp.StartFullOperation(rr.TxMarkers, rr.RxMarkers, rr.CRC, 0, 0)
	return a, b, ir, rr
}

// feed reads into p until n has settled.
func feed(t *testing.T, p *peer, n *MPANegotiation) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		used, err := n.Feed(p.qp.Raw())
		if err == nil {
			p.qp.ConsumeRaw(used)
			return
		}
		require.ErrorIs(t, err, ErrNeedMore)
		require.True(t, time.Now().Before(deadline), "timed out waiting for the MPA frame")
		waitFd(t, p.qp.Fd(), unix.POLLIN, 100)
		if _, err := p.qp.Fill(); err != nil && err != unix.EAGAIN {
			t.Fatalf("fill: %v", err)
		}
	}
}

// Each RTR type: the initiator's zero-length message reaches the
// responder, which consumes it without delivering or completing anything
// and may then send; the initiator's Read RTR completes silently.
func TestLoopbackRTR(t *testing.T) {
	for _, rtr := range []RTRType{RTRSend, RTRWrite, RTRRead} {
		t.Run(rtr.String(), func(t *testing.T) {
			a, b, ir, rr := negotiatedPair(t,
				MPAConfig{Rev: 2, Markers: true, CRC: true, PeerToPeer: true, RTR: rtr},
				MPAConfig{Rev: 2, Markers: true, PeerToPeer: true, RTR: RTRSend | RTRWrite | RTRRead})
			require.Equal(t, rtr, ir.RTR)
			require.Equal(t, rtr, rr.RTR)
			require.Equal(t, MULPDU(SocketMSS(a.qp.Fd()), true), a.qp.MULPDU(), "MULPDU from TCP_MAXSEG")
			a.qp.SetRemoteEvents(true)
			b.qp.SetRemoteEvents(true)
			b.qp.ExpectRTR(rr.RTR)
			require.True(t, b.qp.RTRPending())
			require.NoError(t, a.qp.PostRTR(ir.RTR))
			a.qp.PostSend(OpSend, []byte("after the RTR"))
			run(t, a, b, func() bool { return len(b.segs) > 0 || b.err != nil })
			require.NoError(t, b.err)
			require.False(t, b.qp.RTRPending())
			require.Len(t, b.segs, 1)
			require.Equal(t, "after the RTR", string(b.segs[0].Payload))
			wantMSN := uint32(1)
			if rtr == RTRSend {
				wantMSN = 2 // the Send RTR took MSN 1 on QN 0
			}
			require.Equal(t, wantMSN, b.segs[0].MSN)
			b.qp.PostSend(OpSend, []byte("responder speaks"))
			run(t, a, b, func() bool { return len(a.segs) > 0 || a.err != nil })
			require.NoError(t, a.err)
			require.Equal(t, "responder speaks", string(a.segs[0].Payload))
			require.Empty(t, a.comps, "the RTR completes nothing")
			require.Empty(t, b.comps, "the RTR completes nothing")
			require.Zero(t, a.qp.OutstandingReads())
		})
	}
}

// A first message that is not the agreed RTR ends the connection with MPA
// error 7 and is not delivered.
func TestLoopbackWrongRTR(t *testing.T) {
	for _, c := range []struct {
		name string
		want RTRType
		post func(q *QP)
	}{
		{"Send instead of Write", RTRWrite, func(q *QP) { q.PostSend(OpSend) }},
		{"non-empty Send", RTRSend, func(q *QP) { q.PostSend(OpSend, []byte("x")) }},
		{"Write instead of Read", RTRRead, func(q *QP) { q.PostWrite(rtrSTag, 0) }},
		{"Write with data", RTRWrite, func(q *QP) { q.PostWrite(rtrSTag, 0, []byte("data")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := qpPair(t, pairOpts{true, true})
			b.qp.ExpectRTR(c.want)
			c.post(a.qp)
			run(t, a, b, func() bool { return b.err != nil || len(b.segs) > 0 })
			require.ErrorIs(t, b.err, &Error{Layer: LayerMPA, Code: MPAErrNoMatchingRTR})
			require.Empty(t, b.segs)
			require.True(t, b.qp.RTRPending())
		})
	}
}

// TestSameHost: loopback and a connection to the host's own address are the
// same host; another address, or an unknown family, is not.
func TestSameHost(t *testing.T) {
	v4 := func(a, b, c, d byte) [16]byte { return [16]byte{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d} }
	own := v4(10, 0, 0, 5)
	six := [16]byte{0: 0xfd, 15: 7}
	for _, tc := range []struct {
		peer, local [16]byte
		want        bool
	}{
		{v4(127, 0, 0, 1), v4(127, 0, 0, 1), true},
		{v4(127, 1, 2, 3), v4(127, 0, 0, 1), true},
		{[16]byte{15: 1}, [16]byte{15: 1}, true},
		{own, own, true},
		{six, six, true},
		{v4(10, 0, 0, 6), own, false},
		{v4(128, 0, 0, 1), own, false},
		{[16]byte{12: 127, 15: 1}, own, false}, // IPv4-compatible, not mapped
		{[16]byte{}, [16]byte{}, false},
	} {
		require.Equal(t, tc.want, SameHostAddr(tc.peer, tc.local), "peer %v local %v", tc.peer, tc.local)
	}
	a, b := tcpPair(t)
	require.True(t, SameHost(a))
	require.True(t, SameHost(b))
	u, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer unix.Close(u[0])
	defer unix.Close(u[1])
	require.False(t, SameHost(u[0]))
}

// TestSocketAddr: SocketAddr says what unix.Getpeername and unix.Getsockname
// say, for IPv4 (v4-mapped) and IPv6, and fails on other families and on a
// descriptor that is not open.
func TestSocketAddr(t *testing.T) {
	check := func(fd int) {
		for _, peer := range []bool{true, false} {
			var sa unix.Sockaddr
			var err error
			if peer {
				sa, err = unix.Getpeername(fd)
			} else {
				sa, err = unix.Getsockname(fd)
			}
			require.NoError(t, err)
			var want [16]byte
			var port int
			switch s := sa.(type) {
			case *unix.SockaddrInet4:
				want[10], want[11] = 0xff, 0xff
				copy(want[12:], s.Addr[:])
				port = s.Port
			case *unix.SockaddrInet6:
				want, port = s.Addr, s.Port
			default:
				t.Fatalf("family of %T", sa)
			}
			got, gotPort, ok := SocketAddr(fd, peer)
			require.True(t, ok)
			require.Equal(t, want, got, "peer %v", peer)
			require.Equal(t, port, int(gotPort), "peer %v", peer)
			require.NotZero(t, gotPort)
		}
	}
	a, b := tcpPair(t)
	check(a)
	check(b)

	l, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(l)
	require.NoError(t, unix.Bind(l, &unix.SockaddrInet6{Addr: [16]byte{15: 1}}))
	require.NoError(t, unix.Listen(l, 1))
	sa, err := unix.Getsockname(l)
	require.NoError(t, err)
	c, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(c)
	require.NoError(t, unix.Connect(c, sa))
	check(c)
	require.True(t, SameHost(c))

	u, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer unix.Close(u[0])
	defer unix.Close(u[1])
	_, _, ok := SocketAddr(u[0], true)
	require.False(t, ok, "an AF_UNIX socket")
	_, _, ok = SocketAddr(-1, false)
	require.False(t, ok, "no descriptor")
}
