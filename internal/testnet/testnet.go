// Package testnet gives tests of the protocol packages real sockets to run
// over: a TCP connection on 127.0.0.1 that the test owns.
package testnet

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TCPPair returns the two ends of a loopback TCP connection, the connecting
// one and the accepted one, closed when the test ends.
func TCPPair(t testing.TB) (client, server int) {
	t.Helper()
	return TCPPairMSS(t, 0)
}

// TCPPairMSS is TCPPair with segments of at most mss octets (TCP_MAXSEG on
// both ends before the handshake), as over a link with a small MTU; 0 keeps
// loopback's.
func TCPPairMSS(t testing.TB, mss int) (client, server int) {
	t.Helper()
	l, sa := listen(t, 1)
	defer unix.Close(l)
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	if mss > 0 {
		require.NoError(t, unix.SetsockoptInt(l, unix.IPPROTO_TCP, unix.TCP_MAXSEG, mss))
		require.NoError(t, unix.SetsockoptInt(c, unix.IPPROTO_TCP, unix.TCP_MAXSEG, mss))
	}
	require.NoError(t, unix.Connect(c, sa))
	a, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(a); unix.Close(c) })
	return c, a
}

// Listener returns a TCP socket listening on 127.0.0.1 with a backlog of
// backlog, and its address, closed when the test ends: for a test that
// makes many connections to one listener.
func Listener(t testing.TB, backlog int) (int, unix.Sockaddr) {
	t.Helper()
	l, sa := listen(t, backlog)
	t.Cleanup(func() { unix.Close(l) })
	return l, sa
}

func listen(t testing.TB, backlog int) (int, unix.Sockaddr) {
	t.Helper()
	l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Bind(l, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, unix.Listen(l, backlog))
	sa, err := unix.Getsockname(l)
	require.NoError(t, err)
	return l, sa
}
