package sdpcore

import (
	"fmt"
	"sync/atomic"
)

// state is where a connection is in its life. Its two low bits are the
// phase: the handshake (one state per role), established, failed. The bits
// above them are the closing sequence, steps that once taken hold for good:
//
//	stWrShut   our DisConn is due: the application shut down writing or
//	           closed (also during the handshake, with its early bytes
//	           still to go)
//	stDisSent  our DisConn went out (established only)
//	stPeerDis  the peer's DisConn came (established only): end of stream
//	           after what is queued
//
// A failure changes the phase and keeps the steps: what the application was
// told before it (the peer's end of stream, both DisConns passed) stays so.
//
//	AwaitRequest ─┬─ Hello/HelloAck ──▶ Established ─┬─ our DisConn due ──▶ ShutQueued ── sent ──▶ ShutSent
//	AwaitReply  ──┘                                  └─ the peer's DisConn ─▶ PeerShut
//	                       (both directions in any order end in BothShut)
//	any state but Failed ── reset, protocol fault, timeout, abort ──▶ Failed (steps kept)
//
// Every change goes through Conn.to, which checks it against transitions.
// The connection's other booleans are flags: facts that can be true in any
// state (see the block of them in Conn).
type state uint8

// Phases.
const (
	stAwaitRequest state = iota // active: TCP up, waiting for the MPA Request
	stAwaitReply                // passive: Request sent, waiting for the Reply
	stEstablished               // Hello and HelloAck exchanged
	stFailed                    // c.err says why; nothing more is sent or received

	phaseMask state = 3
)

// Steps of the closing sequence.
const (
	stWrShut  state = 1 << (2 + iota) // our DisConn due (SHUT_WR or close)
	stDisSent                         // our DisConn sent
	stPeerDis                         // the peer's DisConn received

	nStates = 1 << 5 // every value of the phase and the steps
)

// Named states of the closing sequence.
const (
	stAwaitRequestShut = stAwaitRequest | stWrShut // shut down during the handshake: DisConn goes once established
	stAwaitReplyShut   = stAwaitReply | stWrShut
	stShutQueued       = stEstablished | stWrShut                         // our DisConn waits for queued data or a credit
	stShutSent         = stEstablished | stWrShut | stDisSent             // our DisConn sent; the peer may still send
	stPeerShut         = stEstablished | stPeerDis                        // the peer's DisConn received; we may still send
	stPeerShutQueued   = stPeerShut | stWrShut                            // … and ours is due
	stBothShut         = stEstablished | stWrShut | stDisSent | stPeerDis // both DisConns passed: shutdown says ENOTCONN
)

// transitions lists every move of the life cycle. A failure is allowed from
// every state that has not failed, to the same steps; a failed connection
// can still be shut down for writing (which sends nothing).
var transitions = []struct{ from, to state }{
	// Handshake.
	{stAwaitRequest, stEstablished},
	{stAwaitRequest, stAwaitRequestShut},
	{stAwaitRequestShut, stShutQueued},
	{stAwaitReply, stEstablished},
	{stAwaitReply, stAwaitReplyShut},
	{stAwaitReplyShut, stShutQueued},
	// Closing sequence.
	{stEstablished, stShutQueued},
	{stEstablished, stPeerShut},
	{stShutQueued, stShutSent},
	{stShutQueued, stPeerShutQueued},
	{stPeerShut, stPeerShutQueued},
	{stShutSent, stBothShut},
	{stPeerShutQueued, stBothShut},
	// Failures.
	{stAwaitRequest, stFailed},
	{stAwaitRequestShut, stFailed | stWrShut},
	{stAwaitReply, stFailed},
	{stAwaitReplyShut, stFailed | stWrShut},
	{stEstablished, stFailed},
	{stShutQueued, stFailed | stWrShut},
	{stShutSent, stFailed | stWrShut | stDisSent},
	{stPeerShut, stFailed | stPeerDis},
	{stPeerShutQueued, stFailed | stWrShut | stPeerDis},
	{stBothShut, stFailed | stWrShut | stDisSent | stPeerDis},
	// Shut down after the failure.
	{stFailed, stFailed | stWrShut},
	{stFailed | stPeerDis, stFailed | stPeerDis | stWrShut},
}

// allowed[from] has bit to set for each move in transitions.
var allowed = func() (a [nStates]uint32) {
	for _, t := range transitions {
		a[t.from] |= 1 << t.to
	}
	return a
}()

// to moves the connection to next, the one way its state changes. A move
// that transitions lacks is a bug of the engine's: it is counted and
// reported (OnBadTransition), and made anyway, so that the connection goes
// on as the code that asked expects.
func (c *Conn) to(next state) {
	if allowed[c.st&(nStates-1)]&(1<<(next&(nStates-1))) == 0 || next >= nStates {
		c.badTransition(next)
	}
	c.st = next
}

// badTransitions counts the moves to has found illegal, in all connections.
var badTransitions atomic.Uint64

// OnBadTransition, when set, is told of each illegal move of a connection's
// state (a bug): the socket and the states, for a log line.
var OnBadTransition func(fd int, from, to string)

// BadTransitions returns how many illegal state moves the process has seen.
func BadTransitions() uint64 { return badTransitions.Load() }

func (c *Conn) badTransition(next state) {
	badTransitions.Add(1)
	if OnBadTransition != nil {
		OnBadTransition(c.tr.Fd(), c.st.String(), next.String())
	}
}

// Events of the life cycle, each one move through to.

// establish: Hello and HelloAck have been exchanged.
func (c *Conn) establish() { c.to(c.st&^phaseMask | stEstablished) }

// shutWrite: the application has said its last word (SHUT_WR or close);
// our DisConn goes after what is queued. Saying it again changes nothing.
func (c *Conn) shutWrite() {
	if !c.wrShut() {
		c.to(c.st | stWrShut)
	}
}

// sentDisConn: our DisConn is queued on the transport.
func (c *Conn) sentDisConn() { c.to(c.st | stDisSent) }

// gotDisConn: the peer's DisConn has arrived (a second one changes nothing).
func (c *Conn) gotDisConn() {
	if !c.peerDis() {
		c.to(c.st | stPeerDis)
	}
}

// toFailed: the connection has failed (fail, which records why).
func (c *Conn) toFailed() { c.to(c.st&^phaseMask | stFailed) }

// The state as the rest of the package asks for it.

func (c *Conn) phase() state  { return c.st & phaseMask }
func (c *Conn) wrShut() bool  { return c.st&stWrShut != 0 }
func (c *Conn) disSent() bool { return c.st&stDisSent != 0 }
func (c *Conn) peerDis() bool { return c.st&stPeerDis != 0 }

var stateNames = map[state]string{
	stAwaitRequest:     "await-request",
	stAwaitReply:       "await-reply",
	stEstablished:      "established",
	stFailed:           "failed",
	stAwaitRequestShut: "await-request+shut",
	stAwaitReplyShut:   "await-reply+shut",
	stShutQueued:       "shut-queued",
	stShutSent:         "shut-sent",
	stPeerShut:         "peer-shut",
	stPeerShutQueued:   "peer-shut+shut-queued",
	stBothShut:         "both-shut",
}

func (s state) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	if s&phaseMask == stFailed && s < nStates {
		// The steps the connection had taken when it failed.
		n := "failed"
		for _, b := range [...]struct {
			bit  state
			name string
		}{{stWrShut, "+wr-shut"}, {stDisSent, "+dis-sent"}, {stPeerDis, "+peer-dis"}} {
			if s&b.bit != 0 {
				n += b.name
			}
		}
		return n
	}
	return fmt.Sprintf("state(%#x)", uint8(s))
}
