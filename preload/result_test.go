package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"libsdp/sdpcore"
)

// TestResult: what a call returns through the ABI for the usual outcomes.
func TestResult(t *testing.T) {
	require.Equal(t, 7, result(-1, nil, 7, nil))
	require.Equal(t, -int(unix.EAGAIN), result(-1, nil, 0, sdpcore.ErrWouldBlock))
	require.Equal(t, -int(unix.EPIPE), result(-1, nil, 0, unix.EPIPE))
	require.Equal(t, -int(unix.EIO), result(-1, nil, 0, &sdpcore.ProtoError{Err: unix.ECONNRESET}), "a protocol fault is EIO")
	for _, err := range []error{sdpcore.ErrWouldBlock, unix.EPIPE} {
		allocs := testing.AllocsPerRun(100, func() { _ = result(-1, nil, 0, err) })
		require.Zero(t, allocs, "%v: a bare errno allocates nothing (errors.As made two)", err)
	}
}
