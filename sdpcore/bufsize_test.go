package sdpcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSendBufferBound: a sender whose application set a small SO_SNDBUF
// stops taking bytes after about that much beyond what the kernel holds,
// while one with the defaults takes its whole TxBacklog. The reader never
// reads, as a peer that has stopped.
func TestSendBufferBound(t *testing.T) {
	accepted := func(t *testing.T, sndbuf int) int {
		cfd, afd := tcpPair(t)
		for _, fd := range []int{cfd, afd} {
			require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096))
			require.NoError(t, unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4096))
		}
		a, p := connPairOn(t, testConfig(), cfd, afd)
		a.SetBufferSizes(sndbuf, 0)
		chunk := make([]byte, 64<<10)
		total := 0
		until := time.Now().Add(10 * time.Second)
		for i := 0; i < 1000 && time.Now().Before(until); i++ {
			n, err := a.Send([][]byte{chunk}, time.Now())
			if err == ErrWouldBlock {
				// Give the peer's engine (not its application) a look, so
				// credits or the handshake are not what stops us.
				_, _, _, _ = p.Poll(EvIn, time.Now())
				if n, err = a.Send([][]byte{chunk}, time.Now()); err == ErrWouldBlock {
					break
				}
			}
			require.NoError(t, err)
			total += n
		}
		return total
	}
	bounded := accepted(t, 4096)
	free := accepted(t, 0)
	t.Logf("taken: %d bytes with SO_SNDBUF 4096, %d without", bounded, free)
	require.GreaterOrEqual(t, free, testConfig().TxBacklog)
	require.Less(t, bounded, free/2)
}

func TestKernelBufSize(t *testing.T) {
	require.Equal(t, 0, kernelBufSize(0))
	require.Equal(t, 0, kernelBufSize(-1))
	require.Equal(t, minBufSize, kernelBufSize(1))
	require.Equal(t, 8192, kernelBufSize(4096))
}
