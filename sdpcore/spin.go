package sdpcore

import (
	"sync/atomic"
	"time"
)

// Spin is for a caller about to sleep until something it wants is ready
// (a blocking receive or send): over shared memory it polls the ring
// first, without telling the peer to ring, so that a reply that comes
// soon costs neither side a system call. It reports whether the peer
// published meanwhile; either way the caller then looks at the
// connection as before. Without shared memory, or with d 0, it returns
// false at once.
//
// How long it polls adapts to the connection, within d: a poll that
// found nothing halves the next one's time (down to spinFloor), one that
// found the peer's bytes makes the next one long enough for four times
// the wait it saw. A server whose clients think between requests would
// otherwise spend d of CPU on every request for nothing (a blocking
// Python echo server with a client 200 us between messages: 69 us of
// CPU a message with 50 us polls, 23 us without). Once down to the
// floor, every spinProbe-th poll takes the whole d again, so that a peer
// whose answers became quick is noticed; a probe that finds nothing
// leaves the polls at the floor.
func (c *Conn) Spin(d time.Duration) bool {
	if d <= 0 {
		return false
	}
	c.mu.Lock()
	var arrived Arrival
	if sh, ok := c.tr.(sameHoster); ok && c.phase() == stEstablished && c.rqBytes == 0 {
		arrived.head, arrived.seen = sh.Watch()
	}
	c.unlock()
	if arrived.head == nil {
		return false
	}
	n := c.spins.Add(1)
	cur := time.Duration(c.spinFor.Load())
	limit, probe := spinLimit(cur, d, n)
	start := time.Now()
	for i := 0; ; i++ {
		if arrived.Came() {
			c.spinHits.Add(1)
			c.spinFor.Store(int64(spinAfterHit(cur, d, time.Since(start))))
			return true
		}
		if i&63 == 63 && time.Since(start) >= limit {
			if !probe { // a probe that found nothing leaves the floor as it was
				c.spinFor.Store(int64(spinAfterMiss(limit, d)))
			}
			return false
		}
	}
}

// spinFloor is the shortest poll: about what a reply between two busy
// processes takes over shared memory (2-3 us here), so that a
// ping-pong's polls still find it.
const spinFloor = 4 * time.Microsecond

// spinProbe: at the floor, one poll in this many takes the whole bound.
const spinProbe = 16

// spinLimit is how long the n-th poll of a connection polls: cur (its
// adapted time; 0 before the first) within d, or d for a probe.
func spinLimit(cur, d time.Duration, n uint64) (limit time.Duration, probe bool) {
	if cur <= 0 || cur > d {
		return d, false
	}
	if cur <= min(spinFloor, d) && n%spinProbe == 0 && cur < d {
		return d, true
	}
	return cur, false
}

// spinAfterMiss is the next poll's time after one of limit found nothing.
func spinAfterMiss(limit, d time.Duration) time.Duration {
	return max(limit/2, min(spinFloor, d))
}

// spinAfterHit is the next poll's time after one found the peer's bytes
// after waited: no shorter than it was, and long enough for four such
// waits, within d.
func spinAfterHit(cur, d, waited time.Duration) time.Duration {
	if cur <= 0 {
		cur = d
	}
	return min(d, max(cur, 4*waited, min(spinFloor, d)))
}

// Arrival is what a poll checks for a peer's next bytes over shared
// memory: the peer's published position and what this side had seen of it.
// It holds its connection, which holds the region that head points into:
// a region is unmapped once its stream is unreachable, and another thread
// may close the connection while a poll still reads head.
type Arrival struct {
	head *uint64
	seen uint64
	conn *Conn
}

// Came reports whether the peer has published since. It reads only the
// shared position, so it needs no lock.
func (a Arrival) Came() bool { return atomic.LoadUint64(a.head) != a.seen }

// WatchArrivals is Spin's first half for a caller that polls several
// connections at once (an event loop's wait about to sleep): over shared
// memory, with no thread asleep on the connection (it would need the
// doorbell) and nothing received waiting, it takes back this side's sleep
// announcement and returns what to check for the peer's next bytes; false
// otherwise, or when another call holds the connection. The caller looks at
// the connection (PollLook) before it sleeps: the look announces sleep anew.
func (c *Conn) WatchArrivals() (Arrival, bool) {
	if !c.mu.TryLock() {
		return Arrival{}, false
	}
	a := Arrival{conn: c}
	if sh, ok := c.tr.(sameHoster); ok && c.phase() == stEstablished && c.rqBytes == 0 &&
		c.sleepers == 0 && len(c.sleepFds) == 0 {
		a.head, a.seen = sh.Watch()
	}
	c.mu.Unlock() // nothing changed that a sleeper waits for: there is none
	return a, a.head != nil
}

// SpinState is how long a set of connections polls (SpinSet), adapted as
// Spin adapts one connection's: the time of its next poll and the polls
// made so far.
type SpinState struct {
	For   int64 // ns; 0 before the first poll
	Polls uint64
	// Skip: waits left that sleep without polling, after a poll during
	// which the thread lost its CPU to another (Preempted).
	Skip int64
}

// spinSkip is how many waits sleep at once after a poll that lost the CPU:
// where threads outnumber the CPUs, polling takes the CPU a peer needs to
// answer.
const spinSkip = 64

// Preempted notes that the last poll lost the thread's CPU to another
// thread: the next spinSkip waits do not poll.
func (s *SpinState) Preempted() {
	s.Skip = spinSkip
	s.For = 0
}

// NothingToWatch notes that none of the set's connections could be
// polled (not over shared memory, or each with a sleeper or data waiting):
// the next spinSkip waits do not look for one, which costs a call into the
// engine each.
func (s *SpinState) NothingToWatch() { s.Skip = spinSkip }

// Skipping reports whether this wait is one of those Preempted or
// NothingToWatch said not to poll (and counts it).
func (s *SpinState) Skipping() bool {
	if s.Skip <= 0 {
		return false
	}
	s.Skip--
	return true
}

// SpinSet polls the checks of WatchArrivals, within d as state adapts it,
// and kernel (if not nil) about every spinKernelEvery, which reports
// whether something else the caller waits for is ready. It reports
// whether the peer of one of the connections published meanwhile.
func SpinSet(arrived []Arrival, d time.Duration, state *SpinState, kernel func() bool) bool {
	if d <= 0 || len(arrived) == 0 {
		return false
	}
	state.Polls++
	cur := time.Duration(state.For)
	limit, probe := spinLimit(cur, d, state.Polls)
	start := time.Now()
	var next time.Duration // the first check at once: the kernel may have something already
	for i := 0; ; i++ {
		for _, a := range arrived {
			if a.Came() {
				state.For = int64(spinAfterHit(cur, d, time.Since(start)))
				return true
			}
		}
		if i&15 != 15 {
			continue
		}
		waited := time.Since(start)
		if kernel != nil && waited >= next {
			if kernel() {
				return false // the caller looks anyway; the poll's time stays
			}
			next = waited + spinKernelEvery
		}
		if waited >= limit {
			if !probe {
				state.For = int64(spinAfterMiss(limit, d))
			}
			return false
		}
	}
}

// spinKernelEvery: how often SpinSet asks about the caller's kernel
// descriptors (one system call each time).
const spinKernelEvery = 8 * time.Microsecond
