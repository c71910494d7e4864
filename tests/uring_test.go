package tests

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	ringRecvRe = regexp.MustCompile(`^recv-through-ring (-?[A-Z0-9]+) '(.*)'$`)
	readLineRe = regexp.MustCompile(`^read (\d+) '(.*)'$`)
)

// ringBytes takes the "recv-through-ring" observation out of a run of tests/c/uring.c: the
// bytes the program got for it (through the ring, or by read() after the ring refused), and the
// other lines.
func ringBytes(t *testing.T, out string) (got string, refused bool, rest []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		m := ringRecvRe.FindStringSubmatch(lines[i])
		if m == nil {
			rest = append(rest, lines[i])
			continue
		}
		if _, err := strconv.Atoi(m[1]); err == nil {
			got = m[2]
			continue
		}
		refused = true
		require.Less(t, i+1, len(lines), "no read after the refused recv")
		r := readLineRe.FindStringSubmatch(lines[i+1])
		require.NotNil(t, r, "after the refused recv: %q", lines[i+1])
		got = r[2]
		i++
	}
	return got, refused, rest
}

// TestURing: a program that registers a listener and a connection in its epoll set through
// io_uring (IORING_OP_EPOLL_CTL, submitted with syscall(SYS_io_uring_enter), as libuv 1.50 and
// later do for Node.js 22 and 24) and closes through the ring sees what it sees over TCP, in
// every mode: the same completions, the same readiness, the same bytes, end of stream, all
// over SDP. Its one read through the ring (IORING_OP_RECV) of an SDP connection gets the
// same bytes or fails with EOPNOTSUPP, which the program then reads with read(): never a
// protocol byte.
func TestURing(t *testing.T) {
	shim, ctx := setup(t)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "uring")
	out, err := exec.CommandContext(ctx, "gcc", "-O2", "-Wall", "-D_GNU_SOURCE", "-o", bin,
		filepath.Join(root, "tests", "c", "uring.c")).CombinedOutput()
	require.NoError(t, err, "%s", out)

	run := func(env []string) string {
		cmd := exec.CommandContext(ctx, bin, strconv.Itoa(freePort(t)))
		cmd.Env = env
		b, err := cmd.Output()
		require.NoError(t, err, "%s", b)
		require.True(t, strings.HasSuffix(string(b), "end\n"), "did not finish:\n%s", b)
		return string(b)
	}
	plain := run(cleanEnv())
	want, refused, wantRest := ringBytes(t, plain)
	require.False(t, refused, "the kernel refused IORING_OP_RECV:\n%s", plain)
	require.Equal(t, "world", want)

	for _, m := range edgeModes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			dumpLogsOnFailure(t, dir)
			env := sdpEnv(shim, filepath.Join(dir, "uring.%p.log"))
			if m.env != "" {
				env = append(env, strings.Fields(m.env)...)
			}
			got, _, rest := ringBytes(t, run(env))
			assert.Equal(t, want, got, "the bytes of the read through the ring")
			assert.Equal(t, wantRest, rest)
			assert.EqualValues(t, 2, readStats(t, dir, "uring").n(t, "sdp_conns"), "both ends over SDP")
		})
	}
}
