package sdpcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestZeroTimeReadsTheClock: the zero Time that the preload passes on its
// hot paths means the clock's time wherever a timer is set or checked. A
// cork set with it runs out corkMax later, not at once (a time in year 1)
// and not never (a zero time is before every deadline).
func TestZeroTimeReadsTheClock(t *testing.T) {
	require.False(t, orNow(time.Time{}).IsZero())
	given := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, given, orNow(given), "a caller's time is kept")

	a, p := connPair(t, testConfig())
	oneWay(t, p, a, 1)
	t0 := time.Now()
	n, err := p.SendFlags([][]byte{[]byte("held")}, SendMore, time.Time{})
	t1 := time.Now()
	require.NoError(t, err)
	require.Equal(t, 4, n)
	p.mu.Lock()
	until := p.corkUntil
	p.mu.Unlock()
	require.False(t, until.Before(t0.Add(corkMax)), "cork until %v, set after %v", until, t0)
	require.False(t, until.After(t1.Add(corkMax)), "cork until %v, set before %v", until, t1)

	// A zero-time call after the cork ran out sends what it held.
	p.mu.Lock()
	p.corkUntil = time.Now().Add(-time.Millisecond)
	p.mu.Unlock()
	_, _, _, err = p.Poll(EvOut, time.Time{})
	require.NoError(t, err)
	got := readFor(t, a, 4, time.Now().Add(10*time.Second))
	require.Equal(t, "held", string(got))

	// A connecting side's handshake deadline, from a zero time too.
	cfd, _ := tcpPair(t)
	c := NewActive(cfd, testConfig(), time.Time{})
	closeAtCleanup(t, c)
	require.WithinDuration(t, time.Now().Add(testConfig().ConnectTimeout), c.deadline, time.Minute)
}
