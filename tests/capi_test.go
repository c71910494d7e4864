package tests

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// families are the C API test programs, one per call family; TestCAPI runs each in every
// configuration: both ends preloaded (two processes, and one process with both ends in threads
// where the program allows it), only the client preloaded (TCP fallback), only the server
// preloaded, and neither (the same checks over plain TCP, which validates the tests).
var families = []family{
	{name: "stream", prog: "stream", part: "-", conns: 2, self: true},
	{name: "stream-duplex", prog: "stream", part: "duplex", conns: 1, self: true},
	{name: "nonblock", prog: "nonblock", part: "-", conns: 2, self: true},
	{name: "poll", prog: "poll", part: "-", conns: 1, self: true},
	{name: "close", prog: "close", part: "-", conns: 2, self: true},
	{name: "close-epipe", prog: "close", part: "epipe", conns: 1, self: true},
	{name: "epoll", prog: "epoll", part: "-", conns: 1, self: true},
	{name: "dup", prog: "dup", part: "-", conns: 1, self: true},
	{name: "fork-prefork", prog: "fork", part: "prefork", conns: 3},
	{name: "fork-afterio", prog: "fork", part: "afterio", expect: forkAfterIO},
	{name: "signals-eintr", prog: "signals", part: "eintr", conns: 1, self: true},
	{name: "signals-restart", prog: "signals", part: "restart", conns: 1, self: true},
	{name: "ipv6", prog: "ipv6", part: "-", conns: 3, self: true},
	{name: "ioctl", prog: "ioctl", part: "-", conns: 1, self: true},
	{name: "sendfile", prog: "sendfile", part: "-", conns: 1, self: true},
	{name: "zcopy", prog: "zcopy", part: "-", conns: 1, self: true, env: zcopyEnv},
	{name: "zcopy-intr-send", prog: "zcopy_intr", part: "send", conns: 2, env: zcopyEnv},
	{name: "zcopy-intr-restart", prog: "zcopy_intr", part: "restart", conns: 2, env: zcopyEnv},
	{name: "zcopy-intr-recv", prog: "zcopy_intr", part: "recv", conns: 2, env: zcopyEnv},
	{name: "oob", prog: "oob", part: "-", conns: 1, self: true},
	{name: "sockopt", prog: "sockopt", part: "-", conns: 1, self: true, check: corkedSends},
}

// corkedSends checks that sockopt.c's three commands sent under TCP_CORK were held by the
// engine, the second and third joining the first (coalesced_sends counts each join), rather
// than corking the transport.
func corkedSends(t *testing.T, dir string, cfg capiConfig) {
	prefix := "client"
	switch {
	case cfg.self:
		prefix = "self"
	case !cfg.clientPreload || !cfg.serverPreload:
		return // the client's connection is plain TCP
	}
	assert.GreaterOrEqualf(t, readStats(t, dir, prefix).n(t, "coalesced_sends"), int64(2),
		"%s: sends made under TCP_CORK are held by the engine", prefix)
}

// TestCAPI runs the C API test programs of families.
func TestCAPI(t *testing.T) {
	runFamilies(t, families)
}

// forkAfterIO is what fork.c's "afterio" variant uses: the client's connection, plus one made
// by the server's child to the server. A child of a process that loaded the engine uses TCP
// (reason after-fork), and so does the parent's end of that connection (plain-peer); when the
// parent did no SDP I/O, the child's connection runs over SDP.
func forkAfterIO(cfg capiConfig) capiWant {
	switch {
	case cfg.serverPreload && cfg.clientPreload:
		return capiWant{client: &conns{sdp: 1}, server: &conns{sdp: 1, tcp: 2}}
	case cfg.serverPreload:
		return capiWant{server: &conns{sdp: 2, tcp: 1}}
	case cfg.clientPreload:
		return capiWant{client: &conns{tcp: 1}}
	}
	return capiWant{}
}
