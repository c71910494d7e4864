package main

import (
	"sync"

	"libsdp/iwarp"
	"libsdp/sdpcore"
)

// A connection that carries a few KiB and closes, as HTTP without keep-alive does, never earns
// back SDP's set-up: its discovery, MPA and Hello exchange, its engine state and its close cost
// each side of such a connection 3-5 times what TCP does for it (`ab` against nginx, README), and
// shared memory's (a rendezvous socket and a region for each connection) about twice iWARP's
// again. A connection is short when it ended having carried less than shortBytes in fewer than
// shortMsgs SDP messages: one that carried many small messages (a benchmark's, a database
// session's) is where SDP's cost per message wins, whatever its bytes. So a connecting side
// whose last shortRun connections to one peer were short offers that peer no shared memory, and
// once shortTCPRun of them were, makes its next ones there over plain TCP (SDP_SHORT_TCP; the
// shim asks, sdp_short_peer; sdpstat and the log say reason=short-connections). After
// shortProbeFirst of those one still goes over SDP, without shared memory, to notice a peer
// whose connections carry more (the table cannot see what a TCP connection carries); each such
// that is short again doubles the interval, up to shortProbeMax, and one that is not ends both
// rules for that peer. A process's first connections to a peer always go over SDP. shortTCPRun
// is twice shortRun so that a peer whose connections are now long, now short, keeps SDP for the
// long ones: four short ones in a row are common there, eight less so.
const (
	shortBytes      = 64 << 10
	shortMsgs       = 64
	shortRun        = 4
	shortTCPRun     = 8
	shortProbeFirst = 16
	shortProbeMax   = 1024
	shortBatch      = 16   // connections over TCP the shim may make without asking (shortTCP)
	shortPeers      = 1024 // peers remembered; beyond that the table starts again
)

// peerKey is a peer's address (16 octets, IPv4 as v4-mapped, as iwarp.SocketAddr gives it) and
// port; the zero key (port 0, which no connected peer has) is no peer. Not net/netip: its
// package initialisation (unique's) would run in every preloaded process's engine start for the
// sake of a map key.
type peerKey struct {
	addr [16]byte
	port uint16
}

// shortState is what the table knows of one peer.
type shortState struct {
	run     int // consecutive short connections
	skipped int // connections the shim was told to make over TCP since the last one over SDP
	every   int // with run at shortTCPRun: after every connections over TCP, one over SDP
}

var shorts struct {
	mu    sync.Mutex
	peers map[peerKey]*shortState
	conns map[*sdpcore.Conn]peerKey // connecting sides made while the table watched
}

// shortPeer returns the peer of fd, a connecting side, and turns the offer of shared memory off
// in cfg when its recent connections there were all short; the zero key when the peer cannot be
// named.
func shortPeer(fd int, cfg *sdpcore.Config) peerKey {
	addr, port, ok := iwarp.SocketAddr(fd, true)
	if !ok {
		return peerKey{}
	}
	peer := peerKey{addr: addr, port: port}
	shorts.mu.Lock()
	defer shorts.mu.Unlock()
	if s := shorts.peers[peer]; s != nil && s.run >= shortRun && cfg.SameHost {
		cfg.SameHostOff = "the last connections to this peer were short"
	}
	return peer
}

// shortTCP answers the shim (short_peer, shim/rules.c) before a connection to peer: how many
// connections there, this one first, go over plain TCP before it asks again; 0 when this one
// goes over SDP. The shim counts them down itself, so that most
// connects cost no call into the engine (a call wakes the runtime's monitor and costs a
// connection per request about three system calls); at most shortBatch at a time, so that a
// peer whose rule ended meanwhile (a long connection made before it ended) gets SDP back soon.
func shortTCP(peer peerKey) int {
	shorts.mu.Lock()
	defer shorts.mu.Unlock()
	s := shorts.peers[peer]
	if s == nil || s.run < shortTCPRun {
		return 0
	}
	if s.skipped < s.every {
		n := min(s.every-s.skipped, shortBatch)
		s.skipped += n
		return n
	}
	s.skipped = 0
	s.every = min(2*s.every, shortProbeMax)
	return 0
}

// watchShort remembers that c is a connecting side to peer (if valid).
func watchShort(c *sdpcore.Conn, peer peerKey) {
	if peer.port == 0 {
		return
	}
	shorts.mu.Lock()
	if shorts.conns == nil {
		shorts.conns = make(map[*sdpcore.Conn]peerKey)
	}
	shorts.conns[c] = peer
	shorts.mu.Unlock()
}

// endShort records how much c carried, at the application's close or at its end, whichever
// comes first: sent, received, and accepted but not sent yet.
func endShort(c *sdpcore.Conn) {
	shorts.mu.Lock()
	peer, ok := shorts.conns[c]
	delete(shorts.conns, c)
	shorts.mu.Unlock()
	if ok {
		st := c.Stats()
		shortEnded(peer, st.PayloadTx+st.PayloadRx+uint64(max(c.Unsent(), 0)), st.MsgsTx+st.MsgsRx)
	}
}

// shortEnded records that a connection to peer ended having carried n payload octets in msgs
// SDP messages.
func shortEnded(peer peerKey, n, msgs uint64) {
	shorts.mu.Lock()
	defer shorts.mu.Unlock()
	if n >= shortBytes || msgs >= shortMsgs {
		delete(shorts.peers, peer)
		return
	}
	if shorts.peers == nil || len(shorts.peers) >= shortPeers {
		shorts.peers = make(map[peerKey]*shortState)
	}
	s := shorts.peers[peer]
	if s == nil {
		s = &shortState{}
		shorts.peers[peer] = s
	}
	s.run++
	if s.every == 0 {
		s.every = shortProbeFirst
	}
}
