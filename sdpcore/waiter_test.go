package sdpcore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// rung reads the eventfd empty and says whether it had been rung.
func rung(t *testing.T, efd int) bool {
	t.Helper()
	var b [8]byte
	_, err := unix.Read(efd, b[:])
	if err == unix.EAGAIN {
		return false
	}
	require.NoError(t, err)
	return true
}

// TestWakeOnlySleepers: a change to the connection rings its eventfd while a
// thread sleeps on it (PollWait), and not once that thread is back (Woke),
// so a program with one thread per connection pays no eventfd write per
// message; a caller that takes the eventfd without being counted (Waiter)
// gets it rung on every change.
func TestWakeOnlySleepers(t *testing.T) {
	a, b := connPair(t, testConfig())
	until := time.Now().Add(10 * time.Second)
	exchange1 := func() {
		t.Helper()
		n, err := b.Send([][]byte{{7}}, time.Now())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NoError(t, wait(t, a, EvIn, until))
	}
	// Establish, then a sleeper: not ready, so it gets the eventfd.
	oneWay(t, b, a, 1)
	buf := make([]byte, 16)
	ready, _, _, _, efd, err := a.PollWait(EvIn, time.Now(), false, true)
	require.NoError(t, err)
	require.Zero(t, ready&EvIn)
	require.GreaterOrEqual(t, efd, 0)
	require.False(t, rung(t, efd), "looking at the connection rang its own eventfd")

	// Another thread's call takes in new data while the first sleeps.
	_, err = b.Send([][]byte{{8}}, time.Now())
	require.NoError(t, err)
	for i := 0; i < 1000 && a.Queued() == 0; i++ {
		_, _, _, _, _ = a.PollEdges(EvOut, time.Now())
		_, _ = unix.Poll([]unix.PollFd{{Fd: int32(a.Fd()), Events: unix.POLLIN}}, 10)
	}
	require.Equal(t, 1, a.Queued())
	require.True(t, rung(t, efd), "a change while a thread sleeps rings the eventfd")

	// The sleeper is back: changes ring nothing.
	a.Woke()
	n, err := a.Recv([][]byte{buf}, 0, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	exchange1()
	n, err = a.Recv([][]byte{buf}, 0, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.False(t, rung(t, efd), "nobody sleeps, yet the eventfd was rung")

	// An uncounted waiter: rung on every change from then on.
	require.Equal(t, efd, a.Waiter())
	exchange1()
	require.True(t, rung(t, efd), "an uncounted waiter missed a change")
}

// TestBlockingRecvSkipsEmptyRead: in a ping-pong, a blocking receive (RecvBlock,
// then a blocking wait) that comes right after a read that emptied the socket
// waits for the socket instead of reading it first: the reads that find the
// socket empty (a system call each) stay rare instead of one per message.
func TestBlockingRecvSkipsEmptyRead(t *testing.T) {
	a, b := connPair(t, testConfig())
	oneWay(t, b, a, 1)
	const rounds = 200
	until := time.Now().Add(20 * time.Second)
	recv1 := func(c *Conn, flags RecvFlags) error {
		n, err := recvWait(t, c, make([]byte, 1), flags, until)
		if err == nil && n != 1 {
			return fmt.Errorf("read %d bytes", n)
		}
		return err
	}
	echo := make(chan error, 1)
	go func() {
		for i := 0; i < rounds; i++ {
			if err := recv1(b, RecvBlock); err != nil {
				echo <- err
				return
			}
			if _, err := b.Send([][]byte{{byte(i)}}, time.Now()); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	before := a.qp().EmptyReads()
	for i := 0; i < rounds; i++ {
		_, err := a.Send([][]byte{{byte(i)}}, time.Now())
		require.NoError(t, err)
		require.NoError(t, recv1(a, RecvBlock))
	}
	require.NoError(t, <-echo)
	empty := a.qp().EmptyReads() - before
	t.Logf("%d reads found the socket empty in %d round trips", empty, rounds)
	require.Less(t, empty, uint64(rounds/4), "a blocking receive read the empty socket before waiting")
}

// TestWakeEverySleeperOwn: two threads sleep on one connection, each on an
// eventfd of its own (PollWaitOwn); a change rings both, so that the one
// that wakes first and empties its eventfd cannot take the other's wake-up
// (with the connection's one eventfd it could: a Python client whose
// sender waited for room while its reader slept hung so under load). A
// sleeper that is back (WokeOwn) is rung no more.
func TestWakeEverySleeperOwn(t *testing.T) {
	a, b := connPair(t, testConfig())
	oneWay(t, b, a, 1)
	own := [2]int{}
	for i := range own {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Close(fd) })
		own[i] = fd
		ready, _, _, _, efd, err := a.PollWaitOwn(EvIn, time.Now(), false, true, fd)
		require.NoError(t, err)
		require.Zero(t, ready&EvIn)
		require.Equal(t, fd, efd, "a sleeper with its own eventfd sleeps on it")
	}

	_, err := b.Send([][]byte{{9}}, time.Now())
	require.NoError(t, err)
	for i := 0; i < 1000 && a.Queued() == 0; i++ {
		_, _, _, _, _ = a.PollEdges(EvOut, time.Now())
		_, _ = unix.Poll([]unix.PollFd{{Fd: int32(a.Fd()), Events: unix.POLLIN}}, 10)
	}
	require.Equal(t, 1, a.Queued())
	require.True(t, rung(t, own[0]), "the first sleeper missed the change")
	require.True(t, rung(t, own[1]), "the second sleeper missed the change")

	// Both back: a change rings neither.
	a.WokeOwn(own[0])
	a.WokeOwn(own[1])
	buf := make([]byte, 16)
	n, err := a.Recv([][]byte{buf}, 0, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	oneWay(t, b, a, 1)
	require.False(t, rung(t, own[0]), "a thread that is back was rung")
	require.False(t, rung(t, own[1]), "a thread that is back was rung")
}

// TestWithdraw: a receive that finds nothing tells the peer over shared
// memory that this side sleeps, and the peer's next send rings the doorbell;
// taken back (Withdraw: an epoll set's thread is awake and looks again
// before it sleeps), the send rings nothing and the next receive finds it. A
// thread asleep on the connection keeps the announcement, and over iWARP
// there is none to take back.
func TestWithdraw(t *testing.T) {
	a, p, as, _, _, _ := shmPair(t, testConfig())
	oneWay(t, a, p, 1000)
	buf := make([]byte, 64)
	recvNow := func(want string) {
		t.Helper()
		k, err := p.Recv([][]byte{buf}, 0, time.Now())
		require.NoError(t, err)
		require.Equal(t, want, string(buf[:k]))
	}
	send := func(s string) {
		t.Helper()
		_, err := a.Send([][]byte{[]byte(s)}, time.Now())
		require.NoError(t, err)
	}

	_, err := p.Recv([][]byte{buf}, 0, time.Now())
	require.ErrorIs(t, err, ErrWouldBlock)
	rung := as.BellsRung
	send("rings")
	require.Equal(t, rung+1, as.BellsRung, "a send to a side that said it sleeps rings")
	recvNow("rings")

	_, err = p.Recv([][]byte{buf}, 0, time.Now())
	require.ErrorIs(t, err, ErrWouldBlock)
	require.True(t, p.Withdraw(), "the announcement is taken back")
	require.False(t, p.Withdraw(), "once")
	rung = as.BellsRung
	send("quiet")
	require.Equal(t, rung, as.BellsRung, "nothing rings for a side that is awake")
	recvNow("quiet")

	// A thread that sleeps on the connection keeps it.
	_, _, _, _, efd, err := p.PollWait(EvIn, time.Now(), false, false)
	require.NoError(t, err)
	require.GreaterOrEqual(t, efd, 0, "the look sleeps")
	require.False(t, p.Withdraw(), "a sleeper's announcement stays")
	rung = as.BellsRung
	send("sleeper")
	require.Equal(t, rung+1, as.BellsRung, "the sleeper is rung")
	p.Woke()
	recvNow("sleeper")

	_, s := connPair(t, testConfig())
	_, err = s.Recv([][]byte{buf}, 0, time.Now())
	require.ErrorIs(t, err, ErrWouldBlock)
	require.False(t, s.Withdraw(), "over iWARP the socket is the doorbell")
}
