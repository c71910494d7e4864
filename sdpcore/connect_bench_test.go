package sdpcore

import (
	"testing"
	"time"

	"libsdp/internal/testnet"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// BenchmarkConnection measures what one short connection costs both ends
// in this process, set-up to release, beside plain TCP doing the same in
// the same run: connect and accept over loopback, the MPA and Hello
// exchange, a 100-octet request and a 4 KiB response, close, and each
// side's linger until its socket is closed. allocs/op and B/op are the
// engine's own (a web server without keep-alive pays them per request):
//
//	go test -run '^$' -bench BenchmarkConnection -benchmem ./sdpcore
func BenchmarkConnection(b *testing.B) {
	b.Run("sdp", func(b *testing.B) { benchConnections(b, true) })
	b.Run("tcp", func(b *testing.B) { benchConnections(b, false) })
}

func benchConnections(b *testing.B, sdp bool) {
	l, sa := testnet.Listener(b, 16)
	cfg := testConfig()
	cfg.Sanitize()
	req, resp := make([]byte, 100), make([]byte, 4<<10)
	got := make([]byte, 8<<10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		require.NoError(b, err)
		require.NoError(b, unix.Connect(c, sa))
		a, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
		require.NoError(b, err)
		if sdp {
			oneSDPConnection(b, cfg, c, a, req, resp, got)
		} else {
			oneTCPConnection(b, c, a, req, resp, got)
		}
	}
}

// oneTCPConnection is oneSDPConnection's exchange over the sockets themselves.
func oneTCPConnection(b *testing.B, c, a int, req, resp, got []byte) {
	_, err := unix.Write(c, req)
	require.NoError(b, err)
	readFull(b, a, got[:len(req)])
	_, err = unix.Write(a, resp)
	require.NoError(b, err)
	readFull(b, c, got[:len(resp)])
	require.NoError(b, unix.Close(a))
	n, err := unix.Read(c, got)
	require.NoError(b, err)
	require.Zero(b, n, "end of stream")
	require.NoError(b, unix.Close(c))
}

func readFull(b *testing.B, fd int, buf []byte) {
	for k := 0; k < len(buf); {
		n, err := unix.Read(fd, buf[k:])
		require.NoError(b, err)
		require.Positive(b, n, "end of stream after %d of %d octets", k, len(buf))
		k += n
	}
}

// oneSDPConnection sets up SDP on c (connected) and a (accepted) as the
// shim does, exchanges req and resp, and closes both, the server first
// (as a web server without keep-alive does), each lingering until done.
func oneSDPConnection(b *testing.B, cfg Config, c, a int, req, resp, got []byte) {
	until := time.Now().Add(20 * time.Second)
	h := &Hello{Bufs: uint16(cfg.RecvBufs), IPVersion: 4, MaxAdverts: 1,
		DesRemRcvSz: uint32(cfg.BufSize), LocalRcvSz: uint32(cfg.BufSize), LocalPort: 80, FlowControl: cfg.FlowControl}
	mpa := AppendRequest(nil, cfg, h)
	_, err := unix.Write(a, mpa)
	require.NoError(b, err)
	p, err := NewPassive(a, cfg, mpa)
	require.NoError(b, err)
	ac := NewActive(c, cfg, time.Now())
	k, err := ac.Send([][]byte{req}, time.Now())
	require.NoError(b, err)
	require.Equal(b, len(req), k)
	recvFull(b, p, got[:len(req)], until)
	k, err = p.Send([][]byte{resp}, time.Now())
	require.NoError(b, err)
	require.Equal(b, len(resp), k)
	done := make(chan struct{}, 2)
	closeSide(b, p, until, done)
	recvFull(b, ac, got[:len(resp)], until)
	k, err = recvWait(b, ac, got, 0, until)
	require.NoError(b, err)
	require.Zero(b, k, "end of stream")
	closeSide(b, ac, until, done)
	<-done
	<-done
}

// recvFull receives exactly len(buf) octets from c.
func recvFull(b *testing.B, c *Conn, buf []byte, until time.Time) {
	for k := 0; k < len(buf); {
		n, err := recvWait(b, c, buf[k:], 0, until)
		require.NoError(b, err)
		require.Positive(b, n, "end of stream after %d of %d octets", k, len(buf))
		k += n
	}
}

// closeSide closes c as the engine does for the application's close: at
// once when the peer has everything, else lingering on a duplicate of its
// socket (in a goroutine here; one loop for all in the engine). The
// application's descriptor is closed either way; done hears when the
// socket is.
func closeSide(b *testing.B, c *Conn, until time.Time, done chan<- struct{}) {
	fd := c.Fd()
	if c.Close(time.Now()) {
		require.NoError(b, unix.Close(fd))
		done <- struct{}{}
		return
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	require.NoError(b, err)
	require.NoError(b, unix.Close(fd))
	go func() {
		c.Linger(dup, until, nil)
		done <- struct{}{}
	}()
}
