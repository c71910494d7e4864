package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pair is a region seen from both sides, through two mappings of one memfd,
// as two processes see it.
type pair struct {
	maker, peer *Region
	mp, pp      *Producer // the maker's and the peer's producers
	mc, pc      *Consumer
}

func newPair(t testing.TB, data int) *pair {
	t.Helper()
	m, err := Create(data)
	require.NoError(t, err)
	p, err := Open(m.Fd(), data)
	require.NoError(t, err)
	require.NoError(t, m.CloseFd(), "the mappings stay when the memfd is closed")
	t.Cleanup(func() { m.Close(); p.Close() })
	pr := &pair{maker: m, peer: p}
	pr.mp, pr.mc, err = m.Ends(true)
	require.NoError(t, err)
	pr.pp, pr.pc, err = p.Ends(false)
	require.NoError(t, err)
	return pr
}

// pattern fills b with bytes that depend on seq and the position.
func pattern(b []byte, seq int) []byte {
	for i := range b {
		b[i] = byte(seq*131 + i*7)
	}
	return b
}

// TestRingRecords: records of every awkward size (empty, under and over the
// 8-byte alignment, the largest that fits) go from the maker to the peer and
// back, around the ring's end many times, in order and intact.
func TestRingRecords(t *testing.T) {
	const data = 4096
	pr := newPair(t, data)
	sizes := []int{0, 1, 7, 8, 9, 100, 1000, 4000, MaxRecord(data), 3, 2048}
	for _, dir := range []struct {
		name string
		p    *Producer
		c    *Consumer
	}{{"maker-to-peer", pr.mp, pr.pc}, {"peer-to-maker", pr.pp, pr.mc}} {
		t.Run(dir.name, func(t *testing.T) {
			var got []byte
			sent, recv := 0, 0
			const total = 500
			for recv < total {
				for sent < total {
					b := pattern(make([]byte, sizes[sent%len(sizes)]), sent)
					// split in parts, so that a part may end at the ring's end
					err := dir.p.Append(b[:len(b)/3], b[len(b)/3:])
					if errors.Is(err, ErrFull) {
						break
					}
					require.NoError(t, err)
					sent++
				}
				dir.p.Publish()
				n := 0
				for ; ; n++ {
					var err error
					got, err = dir.c.Next(got[:0])
					if errors.Is(err, ErrEmpty) {
						break
					}
					require.NoError(t, err)
					want := pattern(make([]byte, sizes[recv%len(sizes)]), recv)
					require.Truef(t, bytes.Equal(want, got), "record %d: %d bytes, want %d", recv, len(got), len(want))
					recv++
				}
				require.Positive(t, n, "a full ring had records")
				dir.c.Release()
			}
			idle, err := dir.p.Idle()
			require.NoError(t, err)
			assert.True(t, idle)
		})
	}
	require.ErrorIs(t, pr.mp.Append(make([]byte, MaxRecord(data)+1)), ErrTooBig)
}

// TestRingWake: the flags wake a sleeping end exactly when it sleeps, once.
func TestRingWake(t *testing.T) {
	pr := newPair(t, 4096)
	p, c := pr.mp, pr.pc
	sleep, err := c.Sleep()
	require.NoError(t, err)
	require.True(t, sleep, "an empty ring: sleep")
	require.NoError(t, p.Append([]byte("a")))
	assert.True(t, p.Publish(), "the consumer sleeps: wake it")
	require.NoError(t, p.Append([]byte("b")))
	assert.False(t, p.Publish(), "one wake per sleep")
	sleep, err = c.Sleep()
	require.NoError(t, err)
	assert.False(t, sleep, "records wait: no sleep")
	require.NoError(t, p.Append([]byte("c")))
	assert.False(t, p.Publish(), "Sleep that found records cleared its flag")

	// The producer waits for room; the consumer's release wakes it.
	pr = newPair(t, 4096)
	p, c = pr.mp, pr.pc
	for i := 0; i < 8; i++ {
		require.NoError(t, p.Append(make([]byte, 500)), "8 records of 512 bytes fill 4096")
	}
	require.ErrorIs(t, p.Append(nil), ErrFull)
	p.Publish()
	wait, err := p.WaitRoom(500)
	require.NoError(t, err)
	require.True(t, wait, "a full ring: wait")
	_, err = c.Next(nil)
	require.NoError(t, err)
	assert.True(t, c.Release(), "room released: wake the producer")
	assert.False(t, c.Release(), "nothing more released: no wake")
	room, err := p.Room()
	require.NoError(t, err)
	assert.Equal(t, 504, room, "one record's 512 bytes, less a header")
	wait, err = p.WaitRoom(504)
	require.NoError(t, err)
	assert.False(t, wait, "the room is there: no wait")
	wait, err = p.WaitRoom(505)
	require.NoError(t, err)
	assert.True(t, wait, "not room enough: wait")

	// A producer that waits for more room than one record frees is woken
	// once, when enough is free: not at every release.
	wait, err = p.WaitRoom(1500) // a record of 1,512 bytes; 512 are free
	require.NoError(t, err)
	require.True(t, wait)
	_, err = c.Next(nil)
	require.NoError(t, err)
	assert.False(t, c.Release(), "1,024 free: not yet")
	_, err = c.Next(nil)
	require.NoError(t, err)
	assert.True(t, c.Release(), "1,536 free: wake")
}

// TestRingConcurrent: a producer and a consumer on two goroutines, each
// with its own mapping, sleeping on a doorbell (a channel here) only
// through Sleep and WaitRoom: 20,000 records of random sizes arrive in
// order and intact, and no wake-up is lost (a lost one hangs, which the
// deadline turns into a failure).
func TestRingConcurrent(t *testing.T) {
	pr := newPair(t, 16384)
	p, c := pr.mp, pr.pc
	const n = 20000
	rng := rand.New(rand.NewSource(1))
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = rng.Intn(3000)
		if i%10 == 0 {
			sizes[i] = rng.Intn(16)
		}
	}
	bellC, bellP := make(chan struct{}, 1), make(chan struct{}, 1)
	ring := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	deadline := time.After(60 * time.Second)
	wait := func(ch chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-deadline:
			return errors.New("no wake-up within 60 s")
		}
	}
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, 3000)
		for i := 0; i < n; i++ {
			b := pattern(buf[:sizes[i]], i)
			for {
				err := p.Append(b)
				if err == nil {
					break
				}
				if !errors.Is(err, ErrFull) {
					errc <- err
					return
				}
				if p.Publish() {
					ring(bellC)
				}
				sleep, err := p.WaitRoom(len(b))
				if err != nil {
					errc <- err
					return
				}
				if sleep {
					if err := wait(bellP); err != nil {
						errc <- err
						return
					}
				}
			}
			if i%7 == 0 && p.Publish() {
				ring(bellC)
			}
		}
		if p.Publish() {
			ring(bellC)
		}
		errc <- nil
	}()
	var got []byte
	for i := 0; i < n; {
		var err error
		got, err = c.Next(got[:0])
		if errors.Is(err, ErrEmpty) {
			if c.Release() {
				ring(bellP)
			}
			sleep, err := c.Sleep()
			require.NoError(t, err)
			if sleep {
				require.NoError(t, wait(bellC), "consumer at record %d", i)
			}
			continue
		}
		require.NoError(t, err)
		want := pattern(make([]byte, sizes[i]), i)
		require.Truef(t, bytes.Equal(want, got), "record %d", i)
		i++
		if i%5 == 0 && c.Release() {
			ring(bellP)
		}
	}
	if c.Release() {
		ring(bellP)
	}
	require.NoError(t, <-errc)
}

// TestRingHostile: every impossible position or header the peer can write
// is ErrCorrupt, never a panic or a read outside the ring; the other
// direction of the region is unharmed.
func TestRingHostile(t *testing.T) {
	const data = 4096
	setup := func(t *testing.T) *pair {
		pr := newPair(t, data)
		require.NoError(t, pr.mp.Append([]byte("hello")))
		require.NoError(t, pr.mp.Append(make([]byte, 100)))
		pr.mp.Publish()
		return pr
	}
	word := func(r *Region, ring, off int) []byte { return r.ring(ring)[off : off+8] }
	cases := []struct {
		name  string
		spoil func(pr *pair) // what the hostile maker does to ring 0
	}{
		{"head past the ring", func(pr *pair) {
			binary.LittleEndian.PutUint64(word(pr.maker, 0, offHead), data+8+128)
		}},
		{"head backwards", func(pr *pair) {
			_, err := pr.pc.Next(nil)
			require.NoError(t, err)
			binary.LittleEndian.PutUint64(word(pr.maker, 0, offHead), 8)
		}},
		{"head unaligned", func(pr *pair) {
			binary.LittleEndian.PutUint64(word(pr.maker, 0, offHead), 3)
		}},
		{"length past head", func(pr *pair) {
			binary.LittleEndian.PutUint64(pr.maker.ring(0)[ControlSize:], 200)
		}},
		{"length huge", func(pr *pair) {
			binary.LittleEndian.PutUint64(pr.maker.ring(0)[ControlSize:], ^uint64(0)-3)
		}},
		{"length past the ring", func(pr *pair) {
			binary.LittleEndian.PutUint64(pr.maker.ring(0)[ControlSize:], data*4)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr := setup(t)
			tc.spoil(pr)
			var err error
			for i := 0; i < 4 && err == nil; i++ {
				_, err = pr.pc.Next(nil)
			}
			require.ErrorIs(t, err, ErrCorrupt)
			// the peer's own sending ring still works
			require.NoError(t, pr.pp.Append([]byte("still")))
			pr.pp.Publish()
			got, err := pr.mc.Next(nil)
			require.NoError(t, err)
			assert.Equal(t, "still", string(got))
		})
	}
	// A hostile consumer: its position backwards, or past what was published.
	for _, tail := range []uint64{data * 2, 1 << 63} {
		pr := setup(t)
		binary.LittleEndian.PutUint64(word(pr.peer, 0, offTail), tail)
		_, err := pr.mp.Room()
		assert.ErrorIs(t, err, ErrCorrupt, "tail %d", tail)
		_, err = pr.mp.Idle()
		assert.ErrorIs(t, err, ErrCorrupt)
	}
	pr := setup(t)
	for pr.mp.Append(make([]byte, 1000)) == nil {
	}
	binary.LittleEndian.PutUint64(word(pr.peer, 0, offTail), data+64)
	assert.ErrorIs(t, pr.mp.Append(make([]byte, 1000)), ErrCorrupt, "tail past the published records")
}

// TestRegionChecks: a region that is not the size agreed, or not sealed,
// is refused; nobody can shrink a region once made.
func TestRegionChecks(t *testing.T) {
	for _, d := range []int{0, 1000, 4095, 6000, MaxData * 2} {
		_, err := Create(d)
		assert.ErrorIs(t, err, ErrSize, "data %d", d)
	}
	m, err := Create(8192)
	require.NoError(t, err)
	defer m.Close()
	_, err = Open(m.Fd(), 4096)
	assert.ErrorIs(t, err, ErrSize, "the peer expects another size")
	assert.ErrorIs(t, unix.Ftruncate(m.Fd(), 100), unix.EPERM, "sealed against shrinking")
	assert.ErrorIs(t, unix.Ftruncate(m.Fd(), 1<<20), unix.EPERM, "sealed against growing")

	fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Ftruncate(fd, int64(2*RingBytes(4096))))
	_, err = Open(fd, 4096)
	assert.ErrorIs(t, err, ErrUnsealed)

	_, err = NewProducer(make([]byte, ControlSize+100))
	assert.ErrorIs(t, err, ErrSize)
}

// TestPrompt: the producer's Prompt reaches the consumer on the other
// mapping, and only that direction's, and stays.
func TestPrompt(t *testing.T) {
	pr := newPair(t, MinData)
	require.False(t, pr.pc.Prompted(), "a fresh ring")
	require.NoError(t, pr.mp.Append([]byte("x")))
	pr.mp.Publish()
	require.False(t, pr.pc.Prompted())
	pr.mp.Prompt()
	require.True(t, pr.pc.Prompted())
	require.False(t, pr.mc.Prompted(), "the other direction")
	_, err := pr.pc.Next(nil)
	require.NoError(t, err)
	pr.pc.Release()
	require.True(t, pr.pc.Prompted(), "it stays")
}

// TestTrimUnread: the pages given back are exactly those outside the
// unread records, also when those wrap around the ring's end; the records
// are read intact afterwards.
func TestTrimUnread(t *testing.T) {
	const data = 64 << 10
	for _, lead := range []int{0, 20 << 10, data - 6<<10} {
		pr := newPair(t, data)
		if lead > 0 { // move the positions on: written, read, released
			require.NoError(t, pr.mp.Append(make([]byte, lead-recHeader)))
			pr.mp.Publish()
			_, err := pr.pc.Next(nil)
			require.NoError(t, err)
			pr.pc.Release()
		}
		for i := 0; i < data/4096; i++ { // every page written once
			pr.mp.r.data[i*4096] = 1
		}
		rec := pattern(make([]byte, 10<<10), lead)
		require.NoError(t, pr.mp.Append(rec))
		pr.mp.Publish()
		require.NoError(t, pr.mp.TrimUnread())
		n, err := pr.maker.Resident()
		require.NoError(t, err)
		// The record and its header span 11 KiB: three or four pages, and the control pages.
		assert.LessOrEqual(t, n, 2*ControlSize+4*4096, "lead %d", lead)
		assert.GreaterOrEqual(t, n, ControlSize+3*4096, "lead %d", lead) // the second ring's control page was never written
		got, err := pr.pc.Next(nil)
		require.NoError(t, err)
		assert.Equal(t, rec, got, "lead %d", lead)
		pr.pc.Release()
		require.NoError(t, pr.mp.TrimUnread())
		n, err = pr.maker.Resident()
		require.NoError(t, err)
		assert.LessOrEqual(t, n, 2*ControlSize, "all read: all given back")
		n, err = pr.peer.Resident()
		require.NoError(t, err)
		assert.LessOrEqual(t, n, 2*ControlSize, "the peer's mapping shares the pages")
	}
}
