package sdpcore

import (
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// recvSome reads once, waiting (bounded) until something comes.
func recvSome(t *testing.T, c *Conn, n int, until time.Time) string {
	t.Helper()
	b := make([]byte, n)
	k, err := recvWait(t, c, b, 0, until)
	require.NoError(t, err)
	return string(b[:k])
}

func sendStr(t *testing.T, c *Conn, s string, flags SendFlags) {
	t.Helper()
	n, err := c.SendFlags([][]byte{[]byte(s)}, flags, time.Now())
	require.NoError(t, err)
	require.Equal(t, len(s), n)
}

// urgentModes runs f for every flow-control mode and progress mode.
func urgentModes(t *testing.T, f func(t *testing.T, cfg Config)) {
	for fc := FlowControl(0); fc < numFlowControls; fc++ {
		for _, pr := range []Progress{ProgressInline, ProgressAsync} {
			for _, bf := range []Buffering{BufIntegrated, BufSeparate} {
				t.Run(fc.String()+"/"+pr.String()+"/"+bf.String(), func(t *testing.T) {
					cfg := testConfig()
					cfg.FlowControl, cfg.Progress, cfg.Buffering = fc, pr, bf
					f(t, cfg)
				})
			}
		}
	}
}

// peekOOB waits (bounded) until recv(MSG_OOB|MSG_PEEK) returns want: the
// urgent byte that the peer sent last has arrived.
func peekOOB(t *testing.T, c *Conn, want byte, until time.Time) {
	t.Helper()
	one := make([]byte, 1)
	for {
		n, err := c.RecvOOB(one, true, time.Now())
		if err == nil && n == 1 && one[0] == want {
			return
		}
		require.True(t, err == nil || err == ErrWouldBlock, "recv(MSG_OOB): %v", err)
		require.False(t, time.Now().After(until), "urgent byte %q not in by the deadline (have %q, %v)", want, one[:n], err)
		require.NoError(t, wait(t, c, EvPri|EvIn, until))
	}
}

// TestUrgentData: MSG_OOB's last byte is the urgent byte; reads stop at the
// mark, SIOCATMARK and POLLPRI report it, recv(MSG_OOB) reads it once, and
// without SO_OOBINLINE it is left out of the stream; with it, it stays.
func TestUrgentData(t *testing.T) {
	urgentModes(t, func(t *testing.T, cfg Config) {
		{ // indented as a block: the cases below share a and p
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			until := time.Now().Add(10 * time.Second)
			one := make([]byte, 1)
			_, err := a.RecvOOB(one, false, time.Now())
			require.ErrorIs(t, err, unix.EINVAL, "no urgent data")

			sendStr(t, p, "ab", 0)
			sendStr(t, p, "cd", SendOOB)
			sendStr(t, p, "ef", 0)
			require.NoError(t, wait(t, a, EvPri, until))
			require.False(t, a.AtMark(time.Now()))
			require.Equal(t, "abc", recvSome(t, a, 100, until), "a read stops at the mark")
			require.True(t, a.AtMark(time.Now()))
			n, err := a.RecvOOB(one, true, time.Now())
			require.NoError(t, err)
			require.Equal(t, "d", string(one[:n]), "MSG_PEEK")
			n, err = a.RecvOOB(one, false, time.Now())
			require.NoError(t, err)
			require.Equal(t, "d", string(one[:n]))
			_, err = a.RecvOOB(one, false, time.Now())
			require.ErrorIs(t, err, unix.EINVAL, "read already")
			ready, _, _, err := a.Poll(EvPri|EvIn, time.Now())
			require.NoError(t, err)
			require.Equal(t, EvIn, ready, "no POLLPRI once read")
			require.True(t, a.AtMark(time.Now()), "the mark stays until passed")
			require.Equal(t, "ef", recvSome(t, a, 100, until), "the urgent byte is not in the stream")
			require.False(t, a.AtMark(time.Now()))

			// An urgent byte nobody reads is skipped; a filling read stops at the mark.
			sendStr(t, p, "gh", SendOOB)
			sendStr(t, p, "ij", 0)
			require.NoError(t, wait(t, a, EvPri, until))
			require.Equal(t, "g", recvSome(t, a, 100, until))
			n, err = a.Recv([][]byte{make([]byte, 10)}, RecvFill, time.Now())
			require.NoError(t, err)
			require.Zero(t, n, "a filling read at the mark")
			require.Equal(t, "ij", recvSome(t, a, 100, until))
			_, err = a.RecvOOB(one, false, time.Now())
			require.ErrorIs(t, err, unix.EINVAL, "passed")

			// SO_OOBINLINE: the byte stays in the stream; recv(MSG_OOB) is EINVAL.
			require.NoError(t, unix.SetsockoptInt(a.Fd(), unix.SOL_SOCKET, unix.SO_OOBINLINE, 1))
			sendStr(t, p, "kl", SendOOB)
			sendStr(t, p, "m", 0)
			require.NoError(t, wait(t, a, EvPri, until))
			_, err = a.RecvOOB(one, false, time.Now())
			require.ErrorIs(t, err, unix.EINVAL, "SO_OOBINLINE")
			require.Equal(t, "k", recvSome(t, a, 100, until))
			require.True(t, a.AtMark(time.Now()))
			got := recvSome(t, a, 100, until)
			if got == "l" {
				got += recvSome(t, a, 100, until)
			}
			require.Equal(t, "lm", got)
			require.False(t, a.AtMark(time.Now()))
		}
	})
}

// TestUrgentOvertaken: a newer urgent byte replaces the mark. The old
// byte stays in the stream when the reader has not reached it, and is
// skipped when the reader stands at it (Linux TCP's tcp_check_urg); several
// urgent bytes in a row, each read with MSG_OOB, leave the stream intact.
func TestUrgentOvertaken(t *testing.T) {
	urgentModes(t, func(t *testing.T, cfg Config) {
		a, p := connPair(t, cfg)
		oneWay(t, p, a, 1)
		until := time.Now().Add(10 * time.Second)
		one := make([]byte, 1)

		sendStr(t, p, "ab", SendOOB)
		sendStr(t, p, "cd", SendOOB)
		sendStr(t, p, "e", 0)
		peekOOB(t, a, 'd', until)
		require.Equal(t, "abc", recvSome(t, a, 100, until), "the older urgent byte is normal data")
		require.True(t, a.AtMark(time.Now()))
		n, err := a.RecvOOB(one, false, time.Now())
		require.NoError(t, err)
		require.Equal(t, "d", string(one[:n]))
		require.Equal(t, "e", recvSome(t, a, 100, until))

		// The reader stands at each mark when the next urgent byte comes.
		for i := range 5 {
			b := byte('A' + i)
			sendStr(t, p, string(b), SendOOB)
			peekOOB(t, a, b, until)
			require.True(t, a.AtMark(time.Now()), "at the mark of %q", b)
			n, err := a.RecvOOB(one, false, time.Now())
			require.NoError(t, err)
			require.Equal(t, string(b), string(one[:n]))
		}
		sendStr(t, p, "end", 0)
		require.Equal(t, "end", recvSome(t, a, 100, until), "urgent bytes read with MSG_OOB are not in the stream")
		_, err = a.RecvOOB(one, false, time.Now())
		require.ErrorIs(t, err, unix.EINVAL)
		oneWay(t, p, a, 100000)
	})
}

// TestUrgentSignal: OnUrgent hears of each new mark once.
func TestUrgentSignal(t *testing.T) {
	var mu sync.Mutex
	got := map[int]int{}
	OnUrgent = func(fd int) {
		mu.Lock()
		got[fd]++
		mu.Unlock()
	}
	t.Cleanup(func() { OnUrgent = nil })
	count := func(fd int) int {
		mu.Lock()
		defer mu.Unlock()
		return got[fd]
	}
	urgentModes(t, func(t *testing.T, cfg Config) {
		a, p := connPair(t, cfg)
		oneWay(t, p, a, 1)
		until := time.Now().Add(10 * time.Second)
		mu.Lock()
		clear(got) // descriptors of earlier runs are reused
		mu.Unlock()
		sendStr(t, p, "abc", SendOOB) // announced by OOB_PEND, then the byte
		peekOOB(t, a, 'c', until)
		require.Equal(t, 1, count(a.Fd()))
		sendStr(t, p, "d", SendOOB) // the byte alone
		peekOOB(t, a, 'd', until)
		require.Equal(t, 2, count(a.Fd()))
		sendStr(t, p, "e", 0)
		require.Equal(t, "abc", recvSome(t, a, 100, until), "'c' was overtaken")
		require.Equal(t, "e", recvSome(t, a, 100, until))
		require.Equal(t, 2, count(a.Fd()))
		require.Zero(t, count(p.Fd()))
	})
}

// TestUrgentHeldRing: in the ring modes an urgent byte sent while the
// peer's ring is full waits in the send buffer at its place; the receiver
// hears of it at once (OOB_PEND) and every byte comes in order, the urgent
// one at its mark.
func TestUrgentHeldRing(t *testing.T) {
	for _, fc := range []FlowControl{FlowRDMA, FlowNIC} {
		t.Run(fc.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.FlowControl = fc
			cfg.ZCopyThreshold = 0
			a, p := connPair(t, cfg)
			oneWay(t, p, a, 1)
			until := time.Now().Add(20 * time.Second)
			ring := cfg.RecvBufs * cfg.BufSize
			data := make([]byte, ring+5000)
			rand.New(rand.NewSource(7)).Read(data)
			sent := 0
			for sent < len(data) {
				n, err := p.Send([][]byte{data[sent:]}, time.Now())
				if err == ErrWouldBlock {
					break
				}
				require.NoError(t, err)
				sent += n
			}
			require.Positive(t, p.heldLen(), "the ring filled and bytes are held")
			sendStr(t, p, "xU", SendOOB)
			sendStr(t, p, "yz", 0)
			one := make([]byte, 1)
			want := append(append(append([]byte{}, data[:sent]...), 'x'), "yz"...)
			got := make([]byte, 0, len(want))
			buf := make([]byte, 70000)
			atMark := -1
			for len(got) < len(want) {
				require.False(t, time.Now().After(until), "%d of %d bytes", len(got), len(want))
				if atMark < 0 && a.AtMark(time.Now()) {
					atMark = len(got)
					n, err := a.RecvOOB(one, false, time.Now())
					require.NoError(t, err)
					require.Equal(t, "U", string(one[:n]))
				}
				// The sender's calls take the ring space back and flush what
				// it holds (rdma mode has no background flush).
				_, _, _, err := p.Poll(EvOut, time.Now())
				require.NoError(t, err)
				n, err := a.Recv([][]byte{buf}, 0, time.Now())
				if err == ErrWouldBlock {
					_ = wait(t, a, EvIn|EvPri, time.Now().Add(50*time.Millisecond)) // bounded; the loop checks the deadline
					continue
				}
				require.NoError(t, err)
				got = append(got, buf[:n]...)
			}
			require.Equal(t, want, got)
			require.Equal(t, sent+1, atMark, "the mark is after the held bytes and 'x'")
		})
	}
}

// TestUrgentStream: a stream of sends of mixed sizes, every fifth with
// MSG_OOB, arrives whole and in order with SO_OOBINLINE in every mode
// (urgent bytes in Data messages between ring writes, held ones behind a
// full ring, reads stopping at each mark): every byte is checked.
func TestUrgentStream(t *testing.T) {
	urgentModes(t, func(t *testing.T, cfg Config) {
		a, p := connPair(t, cfg)
		oneWay(t, p, a, 1)
		require.NoError(t, unix.SetsockoptInt(a.Fd(), unix.SOL_SOCKET, unix.SO_OOBINLINE, 1))
		data := make([]byte, 3<<20)
		rng := rand.New(rand.NewSource(11))
		rng.Read(data)
		until := time.Now().Add(60 * time.Second)
		done := make(chan error, 1)
		go func() {
			rest, i := data, 0
			for len(rest) > 0 {
				n := min(len(rest), 1+rng.Intn([]int{16, 3000, 100 << 10}[rng.Intn(3)]))
				var flags SendFlags
				if i%5 == 4 {
					flags = SendOOB
				}
				i++
				// A partial MSG_OOB send: the rest, urgent byte last, again.
				if err := sendBytes(t, p, rest[:n], flags, until); err != nil {
					done <- err
					return
				}
				rest = rest[n:]
			}
			// The last word: in rdma mode only a later call (or this)
			// sends what the full ring made the sender hold.
			done <- p.Shutdown(false, true, time.Now())
			if p.NeedsBackground() {
				go p.Background(time.Minute)
			}
		}()
		got := make([]byte, 0, len(data))
		buf := make([]byte, 200<<10)
		for len(got) < len(data) {
			k, err := a.Recv([][]byte{buf}, 0, time.Now())
			if err == ErrWouldBlock {
				require.NoError(t, wait(t, a, EvIn, until), "%d of %d bytes", len(got), len(data))
				continue
			}
			require.NoError(t, err)
			require.NotZero(t, k, "end of stream after %d bytes", len(got))
			got = append(got, buf[:k]...)
		}
		require.NoError(t, <-done)
		require.Equal(t, data, got)
	})
}

// TestUrgentIntoSink: urgent data sent while the receiver's blocking
// receive has its buffer offered (Write ZCopy's SinkAvail) goes by buffer
// copy: the receive returns the bytes before the mark, and the urgent byte
// and the rest follow as usual.
func TestUrgentIntoSink(t *testing.T) {
	urgentModes(t, func(t *testing.T, cfg Config) {
		a, p := connPair(t, cfg)
		oneWay(t, p, a, 1)
		until := time.Now().Add(10 * time.Second)
		buf := make([]byte, 1<<20)
		offerSink(t, a, p, buf, until)
		sendStr(t, p, "abc", SendOOB)
		sendStr(t, p, "de", 0)
		n, err := recvWait(t, a, buf, RecvWait, until)
		require.NoError(t, err)
		require.Equal(t, "ab", string(buf[:n]), "the receive stops at the mark")
		peekOOB(t, a, 'c', until)
		require.True(t, a.AtMark(time.Now()))
		one := make([]byte, 1)
		n, err = a.RecvOOB(one, false, time.Now())
		require.NoError(t, err)
		require.Equal(t, "c", string(one[:n]))
		require.Equal(t, "de", recvSome(t, a, 100, until))
		oneWay(t, p, a, 100000)
	})
}
