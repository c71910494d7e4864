package main

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"libsdp/sdpcore"
)

// resetShorts empties the table for a test and again after it.
func resetShorts(t *testing.T) {
	t.Helper()
	empty := func() {
		shorts.mu.Lock()
		shorts.peers, shorts.conns = nil, nil
		shorts.mu.Unlock()
	}
	empty()
	t.Cleanup(empty)
}

// overTCP makes n connections to peer as the shim does (it counts down what shortTCP answers
// before it asks again) and returns how many went over TCP, the position (1-based) of each that
// went over SDP, and how many times the engine was asked.
func overTCP(t *testing.T, peer peerKey, n int) (tcp int, sdp []int, asked int) {
	t.Helper()
	left := 0
	for i := 1; i <= n; i++ {
		if left > 0 {
			left--
			tcp++
			continue
		}
		asked++
		if k := shortTCP(peer); k > 0 {
			require.LessOrEqual(t, k, shortBatch)
			left = k - 1
			tcp++
		} else {
			sdp = append(sdp, i)
		}
	}
	return tcp, sdp, asked
}

func TestShortPeersGoOverTCPWithProbes(t *testing.T) {
	resetShorts(t)
	peer := peerKey{addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}, port: 28080}
	other := peerKey{addr: peer.addr, port: 28081}

	for i := 0; i < shortTCPRun-1; i++ {
		require.Zero(t, shortTCP(peer), "after %d short connections", i)
		shortEnded(peer, shortBytes-1, 2)
	}
	require.Zero(t, shortTCP(peer), "after %d short connections", shortTCPRun-1)
	shortEnded(peer, 100, 2)

	// shortProbeFirst over TCP, then one over SDP (a probe); its short end
	// doubles the interval.
	tcp, sdp, _ := overTCP(t, peer, shortProbeFirst+1)
	require.Equal(t, shortProbeFirst, tcp)
	require.Equal(t, []int{shortProbeFirst + 1}, sdp)
	shortEnded(peer, 1, 2)
	tcp, sdp, _ = overTCP(t, peer, 2*shortProbeFirst+1)
	require.Equal(t, 2*shortProbeFirst, tcp)
	require.Equal(t, []int{2*shortProbeFirst + 1}, sdp)
	shortEnded(peer, 1, 2)

	// The interval stops growing at shortProbeMax.
	for every := 4 * shortProbeFirst; every < shortProbeMax; every *= 2 {
		_, sdp, _ = overTCP(t, peer, every+1)
		require.Equal(t, []int{every + 1}, sdp)
		shortEnded(peer, 1, 2)
	}
	for range 2 {
		var asked int
		tcp, sdp, asked = overTCP(t, peer, shortProbeMax+1)
		require.Equal(t, shortProbeMax, tcp)
		require.Equal(t, []int{shortProbeMax + 1}, sdp)
		// The shim asks once per shortBatch connections, and for the one over SDP.
		require.Equal(t, shortProbeMax/shortBatch+1, asked)
		shortEnded(peer, 1, 2)
	}

	// Another port of the same host is another peer.
	require.Zero(t, shortTCP(other))

	// A probe that carries more ends the rule; so does one of many messages.
	for _, end := range []struct{ n, msgs uint64 }{{shortBytes, 2}, {100, shortMsgs}} {
		for range shortTCPRun {
			shortEnded(peer, 1, 2)
		}
		for i := 0; i <= shortProbeMax && shortTCP(peer) > 0; i++ {
		}
		shortEnded(peer, end.n, end.msgs)
		tcp, _, _ = overTCP(t, peer, 3*shortProbeFirst)
		require.Zero(t, tcp, "connections over TCP after one carried %d octets in %d messages", end.n, end.msgs)
	}
}

// TestShortPeerOffersNoSharedMemory: after shortRun short connections to a peer, its next
// connections over SDP (before the TCP rule, and its probes after) offer no shared memory; the
// peer is named as the kernel names it, as the shim's key for 127.0.0.1 does.
func TestShortPeerOffersNoSharedMemory(t *testing.T) {
	resetShorts(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	conn, err := net.Dial("tcp4", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var fd int
	require.NoError(t, raw.Control(func(f uintptr) { fd = int(f) }))

	cfg := sdpcore.Config{SameHost: true}
	peer := shortPeer(fd, &cfg)
	want := peerKey{addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}, port: uint16(ln.Addr().(*net.TCPAddr).Port)}
	require.Equal(t, want, peer, "127.0.0.1 as v4-mapped, the SDP connection's port")
	require.Empty(t, cfg.SameHostOff)
	for range shortRun {
		shortEnded(peer, 1, 2)
	}
	cfg = sdpcore.Config{SameHost: true}
	require.Equal(t, peer, shortPeer(fd, &cfg))
	require.Equal(t, "the last connections to this peer were short", cfg.SameHostOff)
}
