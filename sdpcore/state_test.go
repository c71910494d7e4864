package sdpcore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"golang.org/x/sys/unix"
	"libsdp/iwarp"
)

// In the package's tests an illegal move of a connection's state is a
// panic: every test that drives a connection checks its life cycle too.
func init() {
	OnBadTransition = func(fd int, from, to string) {
		panic(fmt.Sprintf("sdpcore: fd %d: illegal state transition %s -> %s", fd, from, to))
	}
}

// lifeCycle is every move a connection may make, as the event that makes
// it. It is written apart from transitions, which TestTransitions checks
// against it in both directions.
var lifeCycle = []struct {
	from  state
	event string
	to    state
}{
	{stAwaitRequest, "establish", stEstablished},
	{stAwaitReply, "establish", stEstablished},
	{stAwaitRequest, "shutWrite", stAwaitRequestShut},
	{stAwaitReply, "shutWrite", stAwaitReplyShut},
	{stAwaitRequestShut, "establish", stShutQueued},
	{stAwaitReplyShut, "establish", stShutQueued},

	{stEstablished, "shutWrite", stShutQueued},
	{stEstablished, "gotDisConn", stPeerShut},
	{stShutQueued, "sentDisConn", stShutSent},
	{stShutQueued, "gotDisConn", stPeerShutQueued},
	{stPeerShut, "shutWrite", stPeerShutQueued},
	{stShutSent, "gotDisConn", stBothShut},
	{stPeerShutQueued, "sentDisConn", stBothShut},

	{stAwaitRequest, "toFailed", stFailed},
	{stAwaitReply, "toFailed", stFailed},
	{stAwaitRequestShut, "toFailed", stFailed | stWrShut},
	{stAwaitReplyShut, "toFailed", stFailed | stWrShut},
	{stEstablished, "toFailed", stFailed},
	{stShutQueued, "toFailed", stFailed | stWrShut},
	{stShutSent, "toFailed", stFailed | stWrShut | stDisSent},
	{stPeerShut, "toFailed", stFailed | stPeerDis},
	{stPeerShutQueued, "toFailed", stFailed | stWrShut | stPeerDis},
	{stBothShut, "toFailed", stFailed | stWrShut | stDisSent | stPeerDis},

	{stFailed, "shutWrite", stFailed | stWrShut},
	{stFailed | stPeerDis, "shutWrite", stFailed | stWrShut | stPeerDis},
}

var events = map[string]func(*Conn){
	"establish":   (*Conn).establish,
	"shutWrite":   (*Conn).shutWrite,
	"sentDisConn": (*Conn).sentDisConn,
	"gotDisConn":  (*Conn).gotDisConn,
	"toFailed":    (*Conn).toFailed,
}

// moveCaught makes the move from -> to and reports whether it was caught
// as illegal (the tests' OnBadTransition panics), and the state after it.
func moveCaught(from state, move func(*Conn)) (caught bool, after state) {
	c := &Conn{st: from, tr: overQP(iwarp.NewQP(-1))}
	defer func() {
		if r := recover(); r != nil {
			caught, after = true, c.st
		}
	}()
	move(c)
	return false, c.st
}

func TestTransitions(t *testing.T) {
	legal := map[[2]state]bool{}
	for _, tc := range lifeCycle {
		t.Run(tc.from.String()+"/"+tc.event, func(t *testing.T) {
			caught, after := moveCaught(tc.from, events[tc.event])
			require.False(t, caught, "a legal move was caught")
			require.Equal(t, tc.to, after, "%v after %s: %v, want %v", tc.from, tc.event, after, tc.to)
			require.NotContains(t, after.String(), "state(", "a state without a name")
		})
		legal[[2]state{tc.from, tc.to}] = true
	}
	// transitions holds these moves and no others.
	require.Len(t, transitions, len(legal))
	for _, m := range transitions {
		require.True(t, legal[[2]state{m.from, m.to}], "transitions allows %v -> %v, which lifeCycle lacks", m.from, m.to)
	}
	// Every other move is caught, counted, and still made.
	for from := state(0); from < nStates; from++ {
		for to := state(0); to < nStates+2; to++ {
			if legal[[2]state{from, to}] {
				continue
			}
			before := BadTransitions()
			caught, _ := moveCaught(from, func(c *Conn) { c.to(to) })
			require.True(t, caught, "illegal move %v -> %v not caught", from, to)
			require.Equal(t, before+1, BadTransitions(), "illegal move %v -> %v not counted", from, to)
		}
	}
}

// TestIllegalEvents names the mistakes the table guards against.
func TestIllegalEvents(t *testing.T) {
	for _, tc := range []struct {
		name  string
		from  state
		event string
	}{
		{"established twice", stEstablished, "establish"},
		{"established after a failure", stFailed, "establish"},
		{"DisConn sent before the application's shutdown", stEstablished, "sentDisConn"},
		{"DisConn sent during the handshake", stAwaitRequestShut, "sentDisConn"},
		{"DisConn sent twice", stShutSent, "sentDisConn"},
		{"the peer's DisConn during the handshake", stAwaitReply, "gotDisConn"},
		{"the peer's DisConn after a failure", stFailed, "gotDisConn"},
		{"DisConn sent after a failure", stFailed | stWrShut, "sentDisConn"},
		{"failed twice", stFailed, "toFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caught, _ := moveCaught(tc.from, events[tc.event])
			require.True(t, caught)
		})
	}
	// Repeated events that the protocol allows change nothing.
	for _, tc := range []struct {
		from  state
		event string
	}{
		{stShutSent, "shutWrite"}, // shutdown(SHUT_WR) twice, or shutdown then close
		{stFailed | stWrShut, "shutWrite"},
		{stPeerShut, "gotDisConn"}, // a second DisConn from the peer
		{stBothShut, "gotDisConn"},
	} {
		caught, after := moveCaught(tc.from, events[tc.event])
		require.False(t, caught, "%v %s", tc.from, tc.event)
		require.Equal(t, tc.from, after)
	}
}

// TestClosingSequence follows both ends of a real connection through an
// orderly close, one side first.
func TestClosingSequence(t *testing.T) {
	a, p := connPair(t, testConfig())
	st := func(c *Conn) state {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.st
	}
	until := time.Now().Add(10 * time.Second)
	require.Equal(t, stAwaitRequest, st(a))
	require.Equal(t, stAwaitReply, st(p))

	// The connecting side shuts down before the handshake is done: its
	// DisConn waits for it, then goes.
	require.NoError(t, a.Shutdown(false, true, time.Now()))
	require.Contains(t, []state{stAwaitRequestShut, stShutSent}, st(a))
	buf := make([]byte, 16)
	n, err := recvWait(t, p, buf, 0, until)
	require.NoError(t, err)
	require.Zero(t, n, "end of stream")
	require.Equal(t, stShutSent, st(a))
	require.Equal(t, stPeerShut, st(p))

	require.NoError(t, p.Shutdown(false, true, time.Now()))
	require.Equal(t, stBothShut, st(p))
	n, err = recvWait(t, a, buf, 0, until)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, stBothShut, st(a))
	require.Equal(t, unix.ENOTCONN, a.Shutdown(false, true, time.Now()))
	require.True(t, strings.HasPrefix(a.String(), "fc=") && strings.Contains(a.String(), "st=both-shut"), a.String())
}
