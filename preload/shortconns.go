package main

import (
	"sync"

	"libsdp/iwarp"
	"libsdp/sdpcore"
)

// Shared memory's set-up (a rendezvous socket and a region for each connection) costs a
// connection about twice iWARP's CPU and its first message a wait for the accepting side's
// choice; a connection that carries a few KiB and closes, as HTTP without keep-alive does, never
// earns that back. So a connecting side whose last shortRun connections to one peer each ended
// having carried less than shortBytes offers no shared memory to it (sdpstat and the log say
// why), until one of its connections to that peer carries more. A process's first connections
// to a peer always offer it.
const (
	shortBytes = 64 << 10
	shortRun   = 4
	shortPeers = 1024 // peers remembered; beyond that the table starts again
)

// peerKey is a peer's address (16 octets, IPv4 as v4-mapped, as iwarp.SocketAddr gives it) and
// port; the zero key (port 0, which no connected peer has) is no peer. Not net/netip: its
// package initialisation (unique's) would run in every preloaded process's engine start for the
// sake of a map key.
type peerKey struct {
	addr [16]byte
	port uint16
}

var shorts struct {
	mu    sync.Mutex
	run   map[peerKey]int           // consecutive short connections, by peer
	peers map[*sdpcore.Conn]peerKey // connecting sides made while the table watched
}

// shortPeer returns the peer of fd, a connecting side that may offer shared
// memory (cfg.SameHost), and turns the offer off in cfg when its recent
// connections there were all short; the zero key when not watched.
func shortPeer(fd int, cfg *sdpcore.Config) peerKey {
	if !cfg.SameHost {
		return peerKey{}
	}
	addr, port, ok := iwarp.SocketAddr(fd, true)
	if !ok {
		return peerKey{}
	}
	peer := peerKey{addr: addr, port: port}
	shorts.mu.Lock()
	defer shorts.mu.Unlock()
	if shorts.run[peer] >= shortRun {
		cfg.SameHostOff = "the last connections to this peer were short"
	}
	return peer
}

// watchShort remembers that c is a connecting side to peer (if valid).
func watchShort(c *sdpcore.Conn, peer peerKey) {
	if peer.port == 0 {
		return
	}
	shorts.mu.Lock()
	if shorts.peers == nil {
		shorts.peers = make(map[*sdpcore.Conn]peerKey)
	}
	shorts.peers[c] = peer
	shorts.mu.Unlock()
}

// endShort records how much c, at its end, carried.
func endShort(c *sdpcore.Conn) {
	shorts.mu.Lock()
	defer shorts.mu.Unlock()
	peer, ok := shorts.peers[c]
	if !ok {
		return
	}
	delete(shorts.peers, c)
	s := c.Stats()
	if s.PayloadTx+s.PayloadRx >= shortBytes {
		delete(shorts.run, peer)
		return
	}
	if shorts.run == nil || len(shorts.run) >= shortPeers {
		shorts.run = make(map[peerKey]int)
	}
	shorts.run[peer]++
}
