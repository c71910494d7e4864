package sdpcore

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSpinRule: the rule that sets a connection's next poll.
func TestSpinRule(t *testing.T) {
	d := 50 * time.Microsecond
	limit := func(cur, d time.Duration, n uint64) time.Duration {
		l, _ := spinLimit(cur, d, n)
		return l
	}
	// Before the first poll, and above the bound: the whole bound.
	require.Equal(t, d, limit(0, d, 1))
	require.Equal(t, d, limit(2*d, d, 1))
	require.Equal(t, 20*time.Microsecond, limit(20*time.Microsecond, d, 16))
	// At the floor, one poll in spinProbe takes the whole bound: a probe.
	require.Equal(t, spinFloor, limit(spinFloor, d, spinProbe-1))
	l, probe := spinLimit(spinFloor, d, spinProbe)
	require.Equal(t, d, l)
	require.True(t, probe)
	require.Equal(t, spinFloor, limit(spinFloor, d, spinProbe+1))
	// A bound no longer than the floor has no probes.
	_, probe = spinLimit(2*time.Microsecond, 2*time.Microsecond, spinProbe)
	require.False(t, probe)

	// A miss halves, down to the floor.
	require.Equal(t, d/2, spinAfterMiss(d, d))
	require.Equal(t, spinFloor, spinAfterMiss(6*time.Microsecond, d))
	require.Equal(t, spinFloor, spinAfterMiss(spinFloor, d))
	// A bound under the floor is the floor.
	require.Equal(t, 2*time.Microsecond, spinAfterMiss(2*time.Microsecond, 2*time.Microsecond))

	// A hit never shortens, covers four of its waits, stays within d.
	require.Equal(t, d, spinAfterHit(0, d, time.Microsecond))
	require.Equal(t, 8*time.Microsecond, spinAfterHit(spinFloor, d, 2*time.Microsecond))
	require.Equal(t, 20*time.Microsecond, spinAfterHit(20*time.Microsecond, d, time.Microsecond))
	require.Equal(t, d, spinAfterHit(spinFloor, d, 30*time.Microsecond))
	require.Equal(t, spinFloor, spinAfterHit(spinFloor, d, 0))
}

// TestSpinAdapts: polls that find nothing shorten a connection's next
// ones to the floor; a probe with the whole bound that finds the peer's
// bytes after a wait lengthens them to cover it.
func TestSpinAdapts(t *testing.T) {
	a, p, _, _, _, _ := shmPair(t, testConfig())
	oneWay(t, a, p, 1000)
	oneWay(t, p, a, 1000)

	d := time.Millisecond
	for i := 0; i < 20 && time.Duration(p.spinFor.Load()) != spinFloor; i++ {
		require.False(t, p.Spin(d), "nothing was sent")
	}
	require.Equal(t, spinFloor, time.Duration(p.spinFor.Load()), "misses shorten the polls to the floor")
	for i := 0; i < spinProbe && p.Stats().Spins%spinProbe != spinProbe-1; i++ {
		require.False(t, p.Spin(d))
		require.Equal(t, spinFloor, time.Duration(p.spinFor.Load()))
	}
	require.EqualValues(t, spinProbe-1, p.Stats().Spins%spinProbe)

	// A probe that finds nothing leaves the polls at the floor.
	require.False(t, p.Spin(d))
	require.Equal(t, spinFloor, time.Duration(p.spinFor.Load()), "a probe's miss keeps the floor")
	for i := 0; i < spinProbe && p.Stats().Spins%spinProbe != spinProbe-1; i++ {
		require.False(t, p.Spin(d))
	}
	require.EqualValues(t, spinProbe-1, p.Stats().Spins%spinProbe)

	// The next poll is a probe with the whole bound (here 20 s): the
	// message, sent a millisecond after it began, is found by it.
	d = 20 * time.Second
	spins := p.Stats().Spins
	done := make(chan bool, 1)
	go func() { done <- p.Spin(d) }()
	for i := 0; i < 1_000_000 && p.Stats().Spins == spins; i++ {
		runtime.Gosched() // until p polls
	}
	require.Equal(t, spins+1, p.Stats().Spins, "p did not start polling")
	began := time.Now()
	for time.Since(began) < time.Millisecond {
		runtime.Gosched()
	}
	_, err := a.Send([][]byte{[]byte("late")}, time.Now())
	require.NoError(t, err)
	require.True(t, <-done, "the probe saw the message")
	require.GreaterOrEqual(t, time.Duration(p.spinFor.Load()), 4*time.Millisecond, "a hit after a wait lengthens the polls")
	buf := make([]byte, 10)
	k, err := p.Recv([][]byte{buf}, 0, time.Now())
	require.NoError(t, err)
	require.Equal(t, "late", string(buf[:k]))
}

// TestSpinSetNoDoorbell: an event loop's wait polls its connections
// (WatchArrivals, SpinSet) instead of sleeping: the peer's message sent
// while it polls rings no doorbell and ends the poll; a poll that finds
// nothing shortens the next; one whose kernel descriptors become ready
// ends at once; over TCP there is nothing to watch.
func TestSpinSetNoDoorbell(t *testing.T) {
	a, p, as, _, _, _ := shmPair(t, testConfig())
	q, r, qs, _, _, _ := shmPair(t, testConfig())
	oneWay(t, a, p, 1000)
	oneWay(t, q, r, 1000)
	buf := make([]byte, 100)
	// The reads find the rings empty: both streams announce that they sleep.
	for _, c := range []*Conn{p, r} {
		_, err := c.Recv([][]byte{buf}, 0, time.Now())
		require.ErrorIs(t, err, ErrWouldBlock)
	}

	// Nothing comes: the poll ends without, and the next is shorter.
	var st SpinState
	arrived := watchAll(t, p, r)
	require.False(t, SpinSet(arrived, 50*time.Microsecond, &st, nil))
	require.Equal(t, int64(25*time.Microsecond), st.For, "a miss halves the next poll")

	// r's peer sends while the set polls: the poll sees it, and no
	// doorbell is rung, as the poll took back r's sleep announcement.
	st = SpinState{}
	arrived = watchAll(t, p, r)
	started := make(chan struct{})
	var once sync.Once
	kernel := func() bool {
		once.Do(func() { close(started) })
		return false
	}
	done := make(chan bool, 1)
	go func() { done <- SpinSet(arrived, 20*time.Second, &st, kernel) }()
	<-started
	rungA, rungQ := as.BellsRung, qs.BellsRung
	_, err := q.Send([][]byte{[]byte("polled")}, time.Now())
	require.NoError(t, err)
	require.True(t, <-done, "the poll saw the message")
	require.Equal(t, rungQ, qs.BellsRung, "no doorbell for a polling set")
	k, err := r.Recv([][]byte{buf}, 0, time.Now())
	require.NoError(t, err)
	require.Equal(t, "polled", string(buf[:k]))
	// p looks again (the set's look after its poll) and sleeps: a's next
	// message rings.
	_, err = p.Recv([][]byte{buf}, 0, time.Now())
	require.ErrorIs(t, err, ErrWouldBlock)
	_, err = a.Send([][]byte{[]byte("rung")}, time.Now())
	require.NoError(t, err)
	require.Equal(t, rungA+1, as.BellsRung, "a set that looked after its poll sleeps and is rung")
	k, err = p.Recv([][]byte{buf}, 0, time.Now())
	require.NoError(t, err)
	require.Equal(t, "rung", string(buf[:k]))

	// The kernel has something for the set: the poll ends at once,
	// however long it could have been.
	st = SpinState{}
	began := time.Now()
	require.False(t, SpinSet(watchAll(t, p), 20*time.Second, &st, func() bool { return true }))
	require.Less(t, time.Since(began), 10*time.Second, "the kernel's readiness ended the poll")
	require.Zero(t, st.For, "a poll the kernel ended leaves the next one's time as it was")

	// Over TCP there is nothing to watch.
	ta, tp := connPair(t, testConfig())
	oneWay(t, ta, tp, 100)
	_, ok := tp.WatchArrivals()
	require.False(t, ok)
}

// watchAll is WatchArrivals of each of cs, which must all be watchable.
func watchAll(t *testing.T, cs ...*Conn) []Arrival {
	var as []Arrival
	for _, c := range cs {
		a, ok := c.WatchArrivals()
		require.True(t, ok)
		as = append(as, a)
	}
	return as
}

// TestSpinStatePreempted: after a poll that lost the thread's CPU, the
// set's next spinSkip waits sleep without polling, and the one after polls
// again, from the whole bound.
func TestSpinStatePreempted(t *testing.T) {
	st := SpinState{For: int64(spinFloor)}
	require.False(t, st.Skipping(), "a set that was not preempted polls")
	st.Preempted()
	for i := 0; i < spinSkip; i++ {
		require.True(t, st.Skipping(), "wait %d after the preemption", i)
	}
	require.False(t, st.Skipping())
	require.Zero(t, st.For, "the next poll takes the whole bound")

	// A set with nothing to watch does not look again for as many waits.
	st = SpinState{For: int64(spinFloor)}
	st.NothingToWatch()
	for i := 0; i < spinSkip; i++ {
		require.True(t, st.Skipping(), "wait %d after nothing to watch", i)
	}
	require.False(t, st.Skipping())
	require.Equal(t, int64(spinFloor), st.For, "the polls' time is kept")
}
