package sdpcore

import (
	"time"

	"golang.org/x/sys/unix"
)

// Lingering is a closed connection being finished on a descriptor of its
// own, a duplicate of its socket: it sends what is queued and DisConn, and
// waits for the peer's DisConn so that the peer's last credit updates never
// meet a closed socket (which would reset the connection and lose data the
// peer has not read yet). When both DisConns have passed but the peer may
// still acknowledge (peerQuiet), it ends the TCP stream (a FIN, the socket
// still reading) and waits for the peer's end in turn: the peer's engine, at
// the end of our stream, sends nothing more and lets its socket close; two
// ends that close together both finish so.
//
// It goes by steps, so that one goroutine can finish many connections: a
// goroutine started for each close, from the application's thread, costs
// that thread a wake-up of another (preload's linger.go).
type Lingering struct {
	c         *Conn
	fd        int
	until     time.Time
	onSettled func()
	finSent   bool
	lastRx    uint64
	lastMove  time.Time
}

// StartLinger moves c to fd, a duplicate of its socket that the package
// now owns, to be finished by Step until until. onSettled (if not nil) is
// called once, from a Step, when the peer has everything or stopped
// acknowledging (SettleIdle).
func (c *Conn) StartLinger(fd int, until time.Time, onSettled func()) *Lingering {
	ownFd(fd, true)
	c.mu.Lock()
	c.tr.SetFd(fd)
	c.releaseWaiter()
	c.unlock()
	return &Lingering{c: c, fd: fd, until: until, onSettled: onSettled, lastMove: time.Now()}
}

// Fd is the descriptor the connection is finished on.
func (l *Lingering) Fd() int { return l.fd }

// Step does what can be done now. It reports whether the connection is
// finished (or until has passed: then Release), and otherwise the poll
// events to wait for on Fd and for how long at most before the next Step.
func (l *Lingering) Step(now time.Time) (done bool, events int16, wait time.Duration) {
	now = orNow(now)
	c := l.c
	c.mu.Lock()
	c.progress(now)
	c.queueDisConn()
	_ = c.flush()
	done = c.finished()
	if c.stats.MsgsRx != l.lastRx || !c.handed() {
		l.lastRx, l.lastMove = c.stats.MsgsRx, now
	}
	settled := l.onSettled != nil && (c.settled() || now.Sub(l.lastMove) >= SettleIdle)
	if !done && !l.finSent && c.disSent() && c.tr.TxPending() == 0 && c.peerDis() {
		_ = unix.Shutdown(l.fd, unix.SHUT_WR)
		l.finSent = true
	}
	events = unix.POLLIN
	if c.tr.TxPending() > 0 {
		events |= c.roomEvent()
	}
	c.releaseQueue()
	c.unlock()
	if settled {
		l.onSettled()
		l.onSettled = nil
	}
	if done || !now.Before(l.until) {
		return true, 0, 0
	}
	wait = l.until.Sub(now)
	if wait > time.Second {
		wait = time.Second
	}
	if l.onSettled != nil && wait > SettleIdle/5 {
		wait = SettleIdle / 5 // look again for SettleIdle
	}
	return false, events, wait
}

// Release closes the descriptor once Step has reported done.
func (l *Lingering) Release() { closeOwn(l.fd) }

// Finish steps l in the calling goroutine, waiting in poll between steps,
// until it is done, and releases it.
func (l *Lingering) Finish() {
	defer l.Release()
	for {
		done, ev, wait := l.Step(time.Now())
		if done {
			return
		}
		pfd := []unix.PollFd{{Fd: int32(l.fd), Events: ev}}
		_, _ = unix.Poll(pfd, int(wait/time.Millisecond)+1)
	}
}

// Linger finishes a closed connection on fd, a duplicate of its socket, in
// the calling goroutine, and closes fd when done or at until.
func (c *Conn) Linger(fd int, until time.Time, onSettled func()) {
	c.StartLinger(fd, until, onSettled).Finish()
}
