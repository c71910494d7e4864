package sdpcore

import (
	"time"

	"golang.org/x/sys/unix"
)

// Asynchronous progress (SDP_PROGRESS=async, after Majumder, Rixner and Pai,
// "An Event-driven Architecture for MPI Libraries", §3): one goroutine per
// connection waits for the socket's events and handles them at once: arriving
// messages are taken into the connection's buffers (so credits and ring space
// go back to the peer while the application computes), held and queued data
// is flushed when the peer makes room, and RDMA Read Requests are answered by
// the QP as they are parsed. The application's own calls still do everything
// they can themselves: a send with room is written by the caller's thread
// (fast paths stay there), and a receive with data buffered returns without
// waking anything.

// idleWait bounds one wait of the progress goroutine, so that it notices a
// closed or failed connection without being woken.
const idleWait = 100 * time.Millisecond

// fullWait is how long it waits while the application has not read what is
// buffered (rxLimit): it then reads nothing, leaving TCP's window to stop
// the peer.
const fullWait = 10 * time.Millisecond

func (c *Conn) progressLoop() {
	pfd := make([]unix.PollFd, 1)
	for {
		c.mu.Lock()
		if c.closed || c.phase() == stFailed || c.fb != nil {
			c.async = false
			c.unlock()
			return
		}
		c.progress(time.Now())
		var ev int16
		wait := idleWait
		if c.rqBytes < c.rxMax() {
			ev |= unix.POLLIN
		} else {
			wait = fullWait
		}
		if c.tr.TxPending() > 0 {
			ev |= c.roomEvent()
		}
		if c.corked || (((c.phase() == stAwaitRequest && !c.patient) || c.phase() == stAwaitReply) && time.Until(c.deadline) < wait) {
			wait = fullWait // a cork or a handshake deadline runs out on its own
		}
		pfd[0] = unix.PollFd{Fd: int32(c.tr.Fd()), Events: ev}
		c.unlock()
		_, _ = unix.Poll(pfd, int(wait/time.Millisecond))
	}
}
