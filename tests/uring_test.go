package tests

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestURing: a program that registers a listener and a connection in its epoll set through
// io_uring (IORING_OP_EPOLL_CTL, submitted with syscall(SYS_io_uring_enter), as libuv 1.50 and
// later do for Node.js 22 and 24), moves bytes through the ring (RECV, SEND, READ, WRITE,
// READV, WRITEV, RECVMSG, SENDMSG, with and without waiting, MSG_WAITALL), polls through it
// (POLL_ADD, of a connection and of a listener a client then reaches over SDP), cancels
// waiting entries (ASYNC_CANCEL, POLL_REMOVE), asks and sets through it (URING_CMD: SIOCINQ,
// GETSOCKOPT, SETSOCKOPT of a receive timeout after a blocking read used the one setsockopt
// set; before the shim took them, SIOCINQ said 0 and the old timeout ended the read), shuts
// down and closes through it sees line for
// line what it sees over TCP, in every mode, with both ends over
// SDP; on a ring it enters and on one it asks a kernel thread to poll (IORING_SETUP_SQPOLL,
// entered with to_submit 0 only when the ring asks for a wake-up).
func TestURing(t *testing.T) {
	ringEqualsTCP(t, "uring.c", nil, "recv-through-ring 5 'world'\n", 4)
}

// TestLiburing: the same through liburing's shared library, which enters the kernel with
// system call instructions of its own (tests/c/uring_lib.c: an epoll registration, receives
// that wait or not, sends, writes, a poll, a cancel, shutdown and close through the ring), on a
// ring entered by the program and on one a kernel thread polls. Before the shim took
// liburing's rings, the first receive read the MPA Reply.
func TestLiburing(t *testing.T) {
	ringEqualsTCP(t, "uring_lib.c", []string{"-luring"}, "recv: 5 'hello'\n", 2)
}

// ringEqualsTCP builds tests/c/src and runs it plain and then preloaded in every mode of the
// edge suite, with an entered ring and with an SQPOLL ring: each preloaded run's output must
// equal the plain run's, with conns connections over SDP. The plain run must contain sure (the
// kernel's own answer the program's lines are checked against).
func ringEqualsTCP(t *testing.T, src string, libs []string, sure string, conns int64) {
	shim, ctx := setup(t)
	bin := buildTestC(ctx, t, src, libs...)

	run := func(env []string, ring string) string {
		cmd := exec.CommandContext(ctx, bin, strconv.Itoa(freePort(t)), ring)
		cmd.Env = env
		b, err := cmd.Output()
		require.NoError(t, err, "%s", b)
		require.True(t, strings.HasSuffix(string(b), "end\n"), "did not finish:\n%s", b)
		return string(b)
	}
	for _, ring := range []string{"entered", "sqpoll"} {
		plain := run(cleanEnv(), ring)
		require.Contains(t, plain, sure, "the kernel's own run")
		for _, m := range edgeModes {
			t.Run(ring+"/"+m.name, func(t *testing.T) {
				dir := t.TempDir()
				dumpLogsOnFailure(t, dir)
				env := sdpEnv(shim, filepath.Join(dir, "uring.%p.log"))
				if m.env != "" {
					env = append(env, strings.Fields(m.env)...)
				}
				assert.Equal(t, plain, run(env, ring))
				assert.EqualValues(t, conns, readStats(t, dir, "uring").n(t, "sdp_conns"), "every connection over SDP")
			})
		}
	}
}
