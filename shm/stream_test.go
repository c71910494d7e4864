package shm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"libsdp/internal/testnet"
)

// TestByteStream: writes of random sizes arrive in order through reads of
// other random sizes, across records, the ring's end and full rings.
func TestByteStream(t *testing.T) {
	p := newPair(t, MinData)
	rng := rand.New(rand.NewSource(1))
	want := make([]byte, 1<<20)
	rng.Read(want)
	var got []byte
	sent := 0
	buf := make([]byte, 3*MinData)
	for i := 0; len(got) < len(want); i++ {
		require.Less(t, i, 1<<20, "no progress: sent %d, got %d", sent, len(got))
		if sent < len(want) {
			n := min(len(want)-sent, 1+rng.Intn(2*MinData))
			k, err := p.mp.Write(want[sent : sent+n])
			if err != ErrFull {
				require.NoError(t, err)
				require.NotZero(t, k)
			}
			sent += k
			p.mp.Publish()
		}
		k, err := p.pc.Read(buf[:1+rng.Intn(len(buf))])
		if err != ErrEmpty {
			require.NoError(t, err)
		}
		got = append(got, buf[:k]...)
		p.pc.Release()
	}
	require.True(t, bytes.Equal(want, got))
}

// TestHolds: Holds counts what Read takes next, across record boundaries,
// the ring's end and a record Read has begun, and never more than was
// published.
func TestHolds(t *testing.T) {
	p := newPair(t, MinData)
	rng := rand.New(rand.NewSource(2))
	want := make([]byte, 256<<10)
	rng.Read(want)
	var got []byte
	sent := 0
	for i := 0; len(got) < len(want); i++ {
		require.Less(t, i, 1<<20, "no progress: sent %d, got %d", sent, len(got))
		if sent < len(want) {
			n := min(len(want)-sent, 1+rng.Intn(MinData))
			k, err := p.mp.Write(want[sent : sent+n])
			if err != ErrFull {
				require.NoError(t, err)
			}
			sent += k
			p.mp.Publish()
		}
		unread := sent - len(got)
		ok, err := p.pc.Holds(unread)
		require.NoError(t, err)
		require.True(t, ok, "holds the %d bytes published and unread", unread)
		ok, err = p.pc.Holds(unread + 1)
		require.NoError(t, err)
		require.False(t, ok, "holds more than was published")
		buf := make([]byte, 1+rng.Intn(MinData))
		n, err := p.pc.Read(buf)
		if err != ErrEmpty {
			require.NoError(t, err)
		}
		got = append(got, buf[:n]...)
		p.pc.Release()
	}
	require.True(t, bytes.Equal(want, got))
}

// TestHoldsCorrupt: a record header past what was published fails Holds
// as it fails Read.
func TestHoldsCorrupt(t *testing.T) {
	p := newPair(t, MinData)
	_, err := p.mp.Write([]byte("hello"))
	require.NoError(t, err)
	p.mp.Publish()
	p.peer.ring(0)[ControlSize] = 0xff
	_, err = p.pc.Holds(1)
	require.ErrorIs(t, err, ErrCorrupt)
}

// TestByteStreamCorrupt: a record header past what was published, or
// a producer position past the ring, fails the read.
func TestByteStreamCorrupt(t *testing.T) {
	p := newPair(t, MinData)
	_, err := p.mp.Write([]byte("hello"))
	require.NoError(t, err)
	p.mp.Publish()
	mem := p.peer.ring(0)
	mem[ControlSize] = 0xff // the record's length, in the peer's view of the maker's ring
	_, err = p.pc.Read(make([]byte, 16))
	require.ErrorIs(t, err, ErrCorrupt)
}

// streams are both ends of a stream over one region, with a TCP pair as
// the doorbells.
func streams(t *testing.T, data int) (a, b *Stream, afd, bfd int) {
	return streamsOver(t, newPair(t, data))
}

// streamsOver is streams over p's region, for a test that looks at it.
func streamsOver(t *testing.T, p *pair) (a, b *Stream, afd, bfd int) {
	afd, bfd = testnet.TCPPair(t)
	a, err := NewStream(p.maker, true, afd)
	require.NoError(t, err)
	b, err = NewStream(p.peer, false, bfd)
	require.NoError(t, err)
	return a, b, afd, bfd
}

// readable waits (bounded) for fd to poll readable.
func readable(t *testing.T, fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 5000)
	require.NoError(t, err)
	return n == 1
}

// TestStreamDoorbell: a reader that found the ring empty is woken by one
// byte on the socket when data comes; a reader that did not sleep is not.
func TestStreamDoorbell(t *testing.T) {
	a, b, _, bfd := streams(t, MinData)
	buf := make([]byte, 64)
	_, err := b.Read(buf)
	require.ErrorIs(t, err, unix.EAGAIN, "empty")
	n, err := a.Write([]byte("ping"))
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.EqualValues(t, 1, a.BellsRung, "b sleeps")
	require.True(t, readable(t, bfd))
	n, err = b.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "ping", string(buf[:n]))
	// b has not slept since: a second message rings nothing.
	_, err = a.Write([]byte("pong"))
	require.NoError(t, err)
	require.EqualValues(t, 1, a.BellsRung)
	n, err = b.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "pong", string(buf[:n]))
	_, err = b.Read(buf)
	require.ErrorIs(t, err, unix.EAGAIN)
	require.EqualValues(t, 1, b.BellsHeard, "the doorbell was drained")
}

// TestStreamReadQuiet: a quiet read takes what the ring holds and leaves
// the socket alone: the doorbell stays (the socket stays readable for the
// caller's wait), the peer's end is not read, and an empty ring still
// announces sleep, so that the next message rings; a Read then drains.
func TestStreamReadQuiet(t *testing.T) {
	a, b, afd, bfd := streams(t, MinData)
	buf := make([]byte, 64)
	_, err := b.ReadQuiet(buf)
	require.ErrorIs(t, err, unix.EAGAIN, "empty")
	_, err = a.Write([]byte("ping"))
	require.NoError(t, err)
	require.EqualValues(t, 1, a.BellsRung, "b announced sleep")
	require.True(t, readable(t, bfd))
	n, err := b.ReadQuiet(buf)
	require.NoError(t, err)
	require.Equal(t, "ping", string(buf[:n]))
	_, err = b.ReadQuiet(buf)
	require.ErrorIs(t, err, unix.EAGAIN)
	require.Zero(t, b.BellsHeard, "a quiet read drained the socket")
	require.True(t, readable(t, bfd), "the doorbell is still there")
	_, err = a.Write([]byte("pong"))
	require.NoError(t, err)
	require.EqualValues(t, 2, a.BellsRung, "b announced sleep again")
	n, err = b.ReadQuiet(buf)
	require.NoError(t, err)
	require.Equal(t, "pong", string(buf[:n]))
	closeFd(t, afd)
	_, err = b.ReadQuiet(buf)
	require.ErrorIs(t, err, unix.EAGAIN, "the end is the socket's: a quiet read does not look")
	// A Read drains the doorbells and then meets the end.
	for i := 0; ; i++ {
		require.Less(t, i, 10, "no end after the doorbells")
		_, err = b.Read(buf)
		if err != unix.EAGAIN {
			break
		}
		require.True(t, readable(t, bfd))
	}
	require.ErrorIs(t, err, io.EOF)
	require.EqualValues(t, 2, b.BellsHeard)
}

// TestStreamRoom: a writer that filled the ring gets EAGAIN and is woken
// when the reader frees room.
func TestStreamRoom(t *testing.T) {
	a, b, afd, _ := streams(t, MinData)
	big := make([]byte, 4*MinData)
	n, err := a.Write(big)
	require.NoError(t, err)
	require.Less(t, n, len(big))
	_, err = a.Write(big[n:])
	require.ErrorIs(t, err, unix.EAGAIN, "full")
	buf := make([]byte, MinData)
	k, err := b.Read(buf)
	require.NoError(t, err)
	require.Equal(t, n, k)
	require.True(t, readable(t, afd), "the reader rang for the room it freed")
	k, err = a.Write(big[n:])
	require.NoError(t, err)
	require.NotZero(t, k)
}

// TestStreamEnd: what the peer published before it closed or reset the
// socket is read first; then the end.
func TestStreamEnd(t *testing.T) {
	for _, reset := range []bool{false, true} {
		a, b, afd, bfd := streams(t, MinData)
		buf := make([]byte, 64)
		_, err := b.Read(buf)
		require.ErrorIs(t, err, unix.EAGAIN)
		_, err = a.Write([]byte("last words"))
		require.NoError(t, err)
		if reset {
			// Unread bytes on a closed socket: the kernel resets.
			_, err = unix.Write(bfd, []byte("x"))
			require.NoError(t, err)
			require.True(t, readable(t, afd))
		}
		closeFd(t, afd)
		deadline := time.Now().Add(5 * time.Second)
		var got []byte
		for {
			require.True(t, time.Now().Before(deadline))
			n, err := b.Read(buf)
			got = append(got, buf[:n]...)
			if err == unix.EAGAIN {
				require.True(t, readable(t, bfd))
				continue
			}
			if err == nil {
				continue
			}
			if reset {
				require.ErrorIs(t, err, unix.ECONNRESET)
			} else {
				require.ErrorIs(t, err, io.EOF)
			}
			break
		}
		require.Equal(t, "last words", string(got))
	}
}

// closeFd closes the socket fd, leaving /dev/null under its number for
// the pair's cleanup to close (dup3 closes and replaces in one step).
func closeFd(t *testing.T, fd int) {
	nul, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Dup3(nul, fd, unix.O_CLOEXEC))
	require.NoError(t, unix.Close(nul))
}

// TestStreamConcurrent: a writer and a reader on two goroutines, each
// waiting on its own socket as a connection does (write, read its ring,
// write again, then wait), move 8 MiB in random pieces with no wake-up
// lost: a lost one leaves both waiting, which the bounded wait reports.
func TestStreamConcurrent(t *testing.T) {
	a, b, afd, bfd := streams(t, 64<<10)
	const total = 8 << 20
	want := make([]byte, total)
	rand.New(rand.NewSource(3)).Read(want)
	wait := func(fd int) error {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(pfd, 10000)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return errors.New("no doorbell in 10 s: a wake-up was lost")
			}
			return nil
		}
	}
	done := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewSource(4))
		scratch := make([]byte, 64)
		for sent := 0; sent < total; {
			n := min(total-sent, 1+rng.Intn(200<<10))
			k, err := a.Write(want[sent : sent+n])
			sent += k
			if err == nil {
				continue
			}
			if err != unix.EAGAIN {
				done <- err
				return
			}
			// As a connection does: read its own ring (which drains
			// the doorbells), write again, and only then wait.
			if _, err := a.Read(scratch); err != unix.EAGAIN {
				done <- fmt.Errorf("read on the writer's side: %v", err)
				return
			}
			k, err = a.Write(want[sent : sent+n-k])
			sent += k
			if err == unix.EAGAIN {
				err = wait(afd)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	rng := rand.New(rand.NewSource(5))
	got := make([]byte, 0, total)
	buf := make([]byte, 300<<10)
	for len(got) < total {
		n, err := b.Read(buf[:1+rng.Intn(len(buf))])
		got = append(got, buf[:n]...)
		if err == unix.EAGAIN {
			require.NoError(t, wait(bfd), "got %d of %d; writer %v; reader %v", len(got), total, a, b)
			continue
		}
		require.NoError(t, err)
	}
	require.NoError(t, <-done)
	require.True(t, bytes.Equal(want, got))
	t.Logf("bells rung %d and %d, writer waits %d", a.BellsRung, b.BellsRung, a.Waits)
}

// TestStreamFinish: a side whose connection is over gives back the pages
// of the ring it reads at once, read or not, and those of the ring it
// writes once the peer has read them all; until then the peer still reads
// every byte, and its own Finish gives the rest back. A finished stream
// reads and writes nothing more.
func TestStreamFinish(t *testing.T) {
	const data = 256 << 10
	p := newPair(t, data)
	a, b, _, _ := streamsOver(t, p)
	write := func(s *Stream, n int, seed int) []byte {
		want := pattern(make([]byte, n), seed)
		for off := 0; off < n; {
			k, err := s.Write(want[off:])
			require.NoError(t, err)
			off += k
		}
		return want
	}
	resident := func() int {
		n, err := p.maker.Resident()
		require.NoError(t, err)
		return n
	}

	// b's 128 KiB stay unread by a; a's last 64 KiB are unread by b when a finishes.
	write(b, 128<<10, 1)
	read := make([]byte, 0, 64<<10)
	buf := make([]byte, 16<<10)
	want := write(a, 64<<10, 2)
	before := resident()
	require.Greater(t, before, 190<<10, "both rings' pages were written")
	a.Finish()
	after := resident()
	assert.LessOrEqual(t, after, before-128<<10, "a's receive ring is given back, unread")
	assert.Greater(t, after, 2*ControlSize+32<<10, "b has not read a's ring: kept")
	for len(read) < len(want) {
		n, err := b.Read(buf)
		require.NoError(t, err, "every byte a wrote before it finished")
		read = append(read, buf[:n]...)
	}
	require.Equal(t, want, read)
	b.Finish()
	assert.LessOrEqual(t, resident(), 2*ControlSize, "b gives back the ring it read")

	_, err := a.Read(buf)
	assert.ErrorIs(t, err, ErrFinished)
	_, err = a.Write([]byte("more"))
	assert.ErrorIs(t, err, ErrFinished)
	ok, err := a.AppendRecord([]byte("more"))
	assert.False(t, ok)
	assert.ErrorIs(t, err, ErrFinished)
	_, err = b.Pending()
	assert.ErrorIs(t, err, ErrFinished)
	assert.False(t, b.Holds(1))
	a.Finish() // twice is once

	// A side whose peer has read everything gives back both rings.
	p2 := newPair(t, data)
	c, d, _, _ := streamsOver(t, p2)
	write(c, 128<<10, 3)
	for got := 0; got < 128<<10; {
		n, err := d.Read(buf)
		require.NoError(t, err)
		got += n
	}
	c.Finish()
	n, err := p2.maker.Resident()
	require.NoError(t, err)
	assert.LessOrEqual(t, n, 2*ControlSize)
}

// TestStreamTrimIdle: a ring the producer has not written since the last
// call gives its pages back, all but those of records the consumer has not
// read yet; one still being written keeps them; what was kept and what is
// written after a trim arrive intact.
func TestStreamTrimIdle(t *testing.T) {
	const data = 256 << 10
	p := newPair(t, data)
	a, b, _, _ := streamsOver(t, p)
	resident := func() int {
		n, err := p.maker.Resident()
		require.NoError(t, err)
		return n
	}
	buf := make([]byte, 16<<10)
	send := func(n, seed int) {
		want := pattern(make([]byte, n), seed)
		var got []byte
		for off := 0; off < n || len(got) < n; {
			if off < n {
				k, err := a.Write(want[off:])
				if err != unix.EAGAIN {
					require.NoError(t, err)
				}
				off += k
			}
			k, err := b.Read(buf)
			if err != unix.EAGAIN {
				require.NoError(t, err)
			}
			got = append(got, buf[:k]...)
		}
		require.Equal(t, want, got)
	}

	send(200<<10, 1)
	require.Greater(t, resident(), 190<<10)
	assert.False(t, a.TrimIdle(), "written since the last call")
	assert.True(t, a.TrimIdle(), "idle since the last call, all read")
	assert.LessOrEqual(t, resident(), 2*ControlSize)
	assert.False(t, a.TrimIdle(), "trimmed already")

	send(300<<10, 2) // across the ring's end, into pages given back
	assert.False(t, a.TrimIdle())
	// 8 KiB written and not read: the pages around them stay, the rest go.
	unread := pattern(make([]byte, 8<<10), 3)
	k, err := a.Write(unread)
	require.NoError(t, err)
	require.Equal(t, len(unread), k)
	assert.False(t, a.TrimIdle(), "written since")
	assert.True(t, a.TrimIdle())
	assert.LessOrEqual(t, resident(), 2*ControlSize+len(unread)+2*ControlSize, "the unread record's pages only")
	assert.Greater(t, resident(), 2*ControlSize+len(unread)/2)
	var got []byte
	for len(got) < len(unread) {
		n, err := b.Read(buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	require.Equal(t, unread, got, "what the trim kept")
	a.Finish()
	assert.False(t, a.TrimIdle(), "finished")
}
