package tests

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNestedEpoll runs tests/c/nested.c (both ends in one process) preloaded
// and plain: an epoll set with an SDP member, polled and nested.
func TestNestedEpoll(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "nested")
	out, err := exec.CommandContext(ctx, "gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-g",
		"-o", bin, filepath.Join("c", "nested.c")).CombinedOutput()
	require.NoError(t, err, "gcc: %s", out)
	for _, preload := range []bool{true, false} {
		name := map[bool]string{true: "preloaded", false: "plain"}[preload]
		t.Run(name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, bin)
			if preload {
				cmd.Env = sdpEnv(shim, filepath.Join(dir, "nested.%p.log"))
			} else {
				cmd.Env = cleanEnv()
			}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "nest ok")
			if preload {
				stats := logText(t, dir, "nested")
				require.Regexp(t, regexp.MustCompile(`sdp_conns=2 `), stats, "both ends of the connection ran over SDP")
			}
		})
	}
}
