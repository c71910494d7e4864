package sdpcore

import (
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// A thread that blocks on a connection waits on its kernel socket and on
// an eventfd, because another thread's call (or the progress goroutine)
// may drain the socket into the connection's buffers. Ringing the eventfd
// costs a system call on every change, and the thread that made the change
// would find it ringing at its own next wait; so it is rung only while a
// thread sleeps on it. Sleepers say so (PollWait, Woke); a caller that takes
// the eventfd without saying so (Waiter) gets it rung on every change from
// then on.

// wake tells threads waiting on the connection's eventfd that its state
// changed: one thread may have read what another one waits for. During
// the look of the only waiter that did not say it sleeps (lookAlone, an
// epoll set's, which reports what it finds) the eventfd is rung only for
// those that did: for the set it would end its next wait at once, for
// another look. Nor is it rung for such waiters once the application has
// closed the connection (closed): an epoll set's registrations go with
// the descriptor, and a ring would wake its wait with the closed
// descriptor's data (an engine that abandons a connection does not ring
// either: the application learns of it from its next call).
func (c *Conn) wake() {
	c.woken = c.changes
	var one = [8]byte{1}
	if c.efd >= 0 && ((c.uncounted && !c.lookAlone && !c.closed) || c.sleepers > 0) {
		_, _ = unix.Write(c.efd, one[:])
	}
	for _, fd := range c.sleepFds {
		_, _ = unix.Write(fd, one[:])
	}
}

// unlock releases c.mu, first waking the threads that sleep on the
// connection (having said so: PollWait) if its state changed since they
// were last woken: a change made outside progress (the flush of queued
// bytes by another thread's receive, which sends a credit update behind
// them, for one) must reach a sender that sleeps until there is room.
// Waiters that did not say so (epoll sets) learn of changes that calls
// made from the shim, which counts the calls.
func (c *Conn) unlock() {
	if c.changes != c.woken && (c.sleepers > 0 || len(c.sleepFds) > 0) {
		c.wake()
	}
	c.mu.Unlock()
}

// Waiter returns an eventfd that becomes readable when the connection's
// state changes, creating it on first use; -1 if it cannot be had. The
// thread that wakes on it reads it empty; Poll never does, or it could take
// the wake-up from a thread that is still asleep.
func (c *Conn) Waiter() int {
	c.mu.Lock()
	defer c.unlock()
	c.uncounted = true
	return c.waiterLocked()
}

func (c *Conn) waiterLocked() int {
	if c.efd < 0 && !c.closed {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return -1
		}
		fd = raiseFd(fd)
		c.efd = fd
		ownFd(fd, true)
	}
	return c.efd
}

// PollWait is PollEdges for a caller that sleeps on the eventfd it returns
// (efd, -1 when something wanted is ready) until the socket or the eventfd
// is readable, and then calls PollWait with woke set, or Woke. It counts
// as a sleeper from the moment it looked at the connection, under the same
// lock, so a change made after the look rings the eventfd.
//
// block says more: the caller comes from a call on this connection and,
// when nothing wanted is ready, blocks until the socket is readable
// (level-triggered) before it asks again; then a read that would only say
// EAGAIN is skipped.
func (c *Conn) PollWait(want Events, now time.Time, woke, block bool) (ready, wait Events, deadline time.Time, edges uint32, efd int, err error) {
	return c.PollWaitOwn(want, now, woke, block, -1)
}

// PollWaitOwn is PollWait for a caller that sleeps on an eventfd of its
// own (own, not -1: one per thread), which the connection rings on every
// change while the caller says it sleeps. A thread that wakes then empties
// only its own: on the connection's shared eventfd, a thread that woke and
// emptied it could take the wake-up of another thread that had not yet
// looked, which then slept on (two threads of one connection, one blocked
// in send and one in recv, hung so under load).
func (c *Conn) PollWaitOwn(want Events, now time.Time, woke, block bool, own int) (ready, wait Events, deadline time.Time, edges uint32, efd int, err error) {
	c.mu.Lock()
	defer c.unlock()
	if woke {
		c.wokeLocked(own)
	}
	// Back from a wait, the socket may hold data; a poll() of several
	// descriptors may return for another one, so only a blocking caller
	// skips the read.
	// A wait that only reads (a blocking receive's, or poll's and
	// select's for POLLIN and POLLPRI, which report what is ready, not
	// what arrived) needs only something to read (onlyReads).
	c.rxLazy = onlyReads(want)
	ready, wait, deadline, edges, err = c.pollLocked(want, now, block && !woke && want&EvIn != 0)
	c.rxLazy = false
	efd = -1
	if err == nil && ready&want == 0 {
		// What this look changed reaches the threads asleep already
		// now, not this one, which has seen it (unlock would ring it
		// awake at once).
		if c.changes != c.woken {
			c.wake()
		}
		switch {
		case own >= 0:
			if !slices.Contains(c.sleepFds, own) {
				c.sleepFds = append(c.sleepFds, own)
			}
			efd = own
		default:
			if efd = c.waiterLocked(); efd >= 0 {
				c.sleepers++
			}
		}
	}
	return ready, wait, deadline, edges, efd, err
}

// PollWaitRecv is PollWaitOwn for a blocking receive's wait (block), whose
// receive reads right after it: back from the kernel's wait (woke), where
// the receive's sink takes payload from what the socket delivers
// (ReadForSink, sink.go), it reports the connection readable without
// reading, and the receive reads into its own buffer; it waits again if
// nothing came for it.
func (c *Conn) PollWaitRecv(want Events, now time.Time, woke bool, own int) (ready, wait Events, deadline time.Time, edges uint32, efd int, err error) {
	if woke {
		c.mu.Lock()
		if c.receiveReads(want) {
			c.wokeLocked(own)
			edges = c.edges
			c.unlock()
			return EvIn, 0, time.Time{}, edges, -1, nil
		}
		c.mu.Unlock() // nothing changed: no one to wake
	}
	return c.PollWaitOwn(want, now, woke, true, own)
}

// Woke ends the sleep PollWait counted, for a caller that does not look
// again (its wait was interrupted, or another descriptor became ready).
func (c *Conn) Woke() { c.WokeOwn(-1) }

// WokeOwn ends the sleep PollWaitOwn counted for own.
func (c *Conn) WokeOwn(own int) {
	c.mu.Lock()
	c.wokeLocked(own)
	c.unlock()
}

func (c *Conn) wokeLocked(own int) {
	if own >= 0 {
		if i := slices.Index(c.sleepFds, own); i >= 0 {
			c.sleepFds = slices.Delete(c.sleepFds, i, i+1)
		}
	} else if c.sleepers > 0 {
		c.sleepers--
	}
}

// Withdraw is for an epoll set whose wait ended for something else while
// its looks at this connection, having found nothing, had told the peer
// over shared memory that this side sleeps: the peer would ring the
// doorbell (a system call at each end, and a wake-up of the set) for its
// next message, although the set's thread is awake and looks at the
// connection before it sleeps again. The announcement is taken back, unless
// a thread sleeps on the connection (a blocking call, poll or select, which
// only the doorbell wakes) or another call holds it. It reports whether it
// took one back: the set must then look before it sleeps, as the peer's
// next bytes ring nothing.
func (c *Conn) Withdraw() bool {
	if !c.mu.TryLock() {
		return false
	}
	ok := false
	if sh, is := c.tr.(sameHoster); is && c.phase() == stEstablished && c.sleepers == 0 && len(c.sleepFds) == 0 {
		ok = sh.Withdraw()
	}
	c.mu.Unlock() // nothing changed that a sleeper waits for: there is none
	return ok
}

// releaseWaiter closes the eventfd once nobody can wait on it any more.
func (c *Conn) releaseWaiter() {
	if c.efd >= 0 {
		closeOwn(c.efd)
		c.efd = -1
	}
}
