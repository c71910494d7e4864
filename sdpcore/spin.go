package sdpcore

import "time"

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
	var arrived func() bool
	if sh, ok := c.tr.(sameHoster); ok && c.phase() == stEstablished && c.rqBytes == 0 {
		arrived = sh.Watch()
	}
	c.unlock()
	if arrived == nil {
		return false
	}
	n := c.spins.Add(1)
	cur := time.Duration(c.spinFor.Load())
	limit, probe := spinLimit(cur, d, n)
	start := time.Now()
	for i := 0; ; i++ {
		if arrived() {
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
