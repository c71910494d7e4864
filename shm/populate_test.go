package shm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProducerPopulates: a fresh ring's pages are backed ahead of the
// producer's writes, a step at a time, once they reach past populateFrom;
// a ring that carried less holds only the pages written; a full first lap
// leaves the whole ring backed and nothing more to do.
func TestProducerPopulates(t *testing.T) {
	const data = 1 << 20
	pr := newPair(t, data)
	p, c := pr.mp, pr.pc // the maker's ring, read by the peer's mapping
	var err error
	resident := func() int {
		n, err := pr.maker.Resident()
		require.NoError(t, err)
		return n
	}
	base := resident() // control pages
	rec := make([]byte, 16<<10)
	buf := make([]byte, 0, len(rec))
	write := func(k int) {
		for i := 0; i < k; i++ {
			require.NoError(t, p.Append(rec))
			p.Publish()
			buf, err = c.Next(buf[:0])
			require.NoError(t, err)
			require.Len(t, buf, len(rec))
			c.Release()
		}
	}
	write(3) // 48 KiB and headers: below populateFrom
	require.Zero(t, p.ready, "populated before populateFrom")
	require.LessOrEqual(t, resident()-base, 64<<10, "pages beyond those written")
	write(2) // past populateFrom: a step ahead
	require.GreaterOrEqual(t, p.ready, uint64(populateStep))
	require.Less(t, p.ready, uint64(data))
	require.Zero(t, p.ready%pageSize)
	require.GreaterOrEqual(t, resident()-base, int(p.ready))
	write(data / len(rec)) // the rest of the first lap and into the second
	require.EqualValues(t, data, p.ready)
	require.GreaterOrEqual(t, resident()-base, data)
}
