package sdpcore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestErrno: the errno an outcome gives the application, the direct
// Errno (every EAGAIN) without an allocation.
func TestErrno(t *testing.T) {
	require.Equal(t, unix.Errno(0), Errno(nil))
	require.Equal(t, unix.EAGAIN, Errno(ErrWouldBlock))
	require.Equal(t, unix.ECONNRESET, Errno(fmt.Errorf("reading: %w", unix.ECONNRESET)), "a wrapped errno")
	require.Equal(t, unix.EIO, Errno(&ProtoError{}), "a protocol fault")
	require.Equal(t, unix.EIO, Errno(errors.New("anything else")))
	var got unix.Errno
	allocs := testing.AllocsPerRun(100, func() { got = Errno(ErrWouldBlock) })
	require.Equal(t, unix.EAGAIN, got)
	require.Zero(t, allocs)
}
