package sdpcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// recvSome reads once, waiting (bounded) until something comes.
func recvSome(t *testing.T, c *Conn, n int, until time.Time) string {
	t.Helper()
	b := make([]byte, n)
	for {
		k, err := c.Recv([][]byte{b}, 0, time.Now())
		if err == ErrWouldBlock {
			require.NoError(t, wait(t, c, EvIn, until))
			continue
		}
		require.NoError(t, err)
		return string(b[:k])
	}
}

func sendStr(t *testing.T, c *Conn, s string, flags SendFlags) {
	t.Helper()
	n, err := c.SendFlags([][]byte{[]byte(s)}, flags, time.Now())
	require.NoError(t, err)
	require.Equal(t, len(s), n)
}

// TestUrgentData: MSG_OOB's last byte is the urgent byte; reads stop at the
// mark, SIOCATMARK and POLLPRI report it, recv(MSG_OOB) reads it once, and
// without SO_OOBINLINE it is left out of the stream; with it, it stays.
func TestUrgentData(t *testing.T) {
	for _, fc := range []FlowControl{FlowCredit, FlowTransport} {
		t.Run(fc.String(), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.FlowControl = fc
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
		})
	}
}

// TestUrgentDataRingModes: the ring modes carry data without a BSDH.
func TestUrgentDataRingModes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FlowControl = FlowRDMA
	a, p := connPair(t, cfg)
	oneWay(t, p, a, 1)
	_, err := p.SendFlags([][]byte{[]byte("x")}, SendOOB, time.Now())
	require.ErrorIs(t, err, unix.EOPNOTSUPP)
}
