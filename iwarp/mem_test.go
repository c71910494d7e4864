package iwarp

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemTableChecks(t *testing.T) {
	var m MemTable
	buf := make([]byte, 100)
	s, err := m.Register(buf, AccessRemoteWrite)
	require.NoError(t, err)
	require.NotZero(t, s.Index(), "index 0 is never handed out")

	b, f := m.check(s, 10, 90, AccessRemoteWrite)
	require.Equal(t, faultNone, f)
	require.Len(t, b, 90)
	require.Equal(t, 90, cap(b), "a placement cannot reach past its bounds through the slice")
	_, f = m.check(s, 10, 91, AccessRemoteWrite)
	require.Equal(t, faultBounds, f)
	_, f = m.check(s, 101, 0, AccessRemoteWrite)
	require.Equal(t, faultBounds, f)
	_, f = m.check(s, ^uint64(0), 2, AccessRemoteWrite)
	require.Equal(t, faultWrap, f)
	_, f = m.check(s, 0, 1, AccessRemoteRead)
	require.Equal(t, faultRights, f)
	_, f = m.check(s^1, 0, 1, AccessRemoteWrite)
	require.Equal(t, faultSTag, f)
	_, f = m.check(0, 0, 1, AccessRemoteWrite)
	require.Equal(t, faultSTag, f)

	require.True(t, m.Invalidate(s))
	require.False(t, m.Invalidate(s), "an STag is invalidated once")
	_, f = m.check(s, 0, 1, AccessRemoteWrite)
	require.Equal(t, faultSTag, f)
	require.Equal(t, 0, m.Len())
}

// TestMemTableModel runs random registrations and invalidations against a
// map of the STags that must be valid: an STag is valid exactly while its
// registration stands, whatever slots are reused, and a reused slot never
// comes back with its previous key.
func TestMemTableModel(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var m MemTable
	live := map[STag]int{} // STag -> buffer length
	var dead []STag
	lastKey := map[uint32]uint8{}
	for i := 0; i < 20000; i++ {
		if len(live) == 0 || r.Intn(3) != 0 {
			n := r.Intn(64)
			s, err := m.Register(make([]byte, n), AccessRemoteRead)
			require.NoError(t, err)
			_, taken := live[s]
			require.False(t, taken, "STag %v handed out twice", s)
			if k, ok := lastKey[s.Index()]; ok {
				require.NotEqual(t, k, s.Key(), "slot %d reused with its previous key", s.Index())
			}
			lastKey[s.Index()] = s.Key()
			live[s] = n
		} else {
			for s := range live {
				require.True(t, m.Invalidate(s))
				delete(live, s)
				dead = append(dead, s)
				break
			}
		}
		require.Equal(t, len(live), m.Len())
	}
	for s, n := range live {
		buf, acc, ok := m.Region(s)
		require.True(t, ok)
		require.Len(t, buf, n)
		require.Equal(t, AccessRemoteRead, acc)
	}
	stale := 0
	for _, s := range dead {
		if _, ok := live[s]; !ok {
			require.False(t, m.Valid(s), "invalidated STag %v still valid", s)
			stale++
		}
	}
	require.Greater(t, stale, 1000)
}

func TestMemTableKeysVary(t *testing.T) {
	var m MemTable
	keys := map[uint8]bool{}
	for i := 0; i < 200; i++ {
		s, err := m.Register(nil, 0)
		require.NoError(t, err)
		keys[s.Key()] = true
	}
	// 200 draws from 256 values: fewer than 64 distinct would mean the
	// keys are not random.
	require.Greater(t, len(keys), 64)
}
