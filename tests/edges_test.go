package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The differential edge suite: each tests/edges/*.py scenario is a small program, both ends of
// a connection, that prints what it observes at a connection's edges (return values, errno
// names, bytes, readiness). It runs once over the kernel's TCP, which is the oracle, and once
// preloaded in each of edgeModes: the two outputs must be the same, line for line. No expected
// value is written by hand; a scenario's header says only how many connections (counted at
// both ends) must have run over SDP, so that a preloaded run that quietly fell back to TCP does
// not pass as the same.

// edgeModes are the preloaded configurations every scenario runs in.
var edgeModes = []struct{ name, env string }{
	{"default", ""},
	{"credit-separate-async", "SDP_FLOW_CONTROL=credit SDP_BUFFERING=separate SDP_PROGRESS=async"},
	{"rdma-inline", "SDP_FLOW_CONTROL=rdma SDP_PROGRESS=inline"},
	{"rdma-separate-async", "SDP_FLOW_CONTROL=rdma SDP_BUFFERING=separate SDP_PROGRESS=async"},
	{"nic-async", "SDP_FLOW_CONTROL=nic SDP_PROGRESS=async"},
	{"transport-inline", "SDP_FLOW_CONTROL=transport SDP_PROGRESS=inline"},
}

// edgeTimeout bounds one run of a scenario (each scenario bounds its own waits by less).
const edgeTimeout = 60 * time.Second

var sdpConnsHeader = regexp.MustCompile(`(?m)^# sdp-conns: (\d+)$`)

// runEdge runs one scenario with env and returns its output; a scenario that does not end
// with "end" fails the test.
func runEdge(ctx context.Context, t *testing.T, script string, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, edgeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Base(script))
	cmd.Dir = filepath.Dir(script)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	require.NoErrorf(t, err, "%s:\n%s", filepath.Base(script), out.String())
	require.Truef(t, strings.HasSuffix(out.String(), "end\n"), "%s did not finish:\n%s", filepath.Base(script), out.String())
	return out.String()
}

func TestEdges(t *testing.T) {
	// Each run is bounded by edgeTimeout; the suite as a whole is not by caseTimeout, which
	// is one case's budget and not that of 90 scenarios run 7 times each on a busy machine.
	shim, _ := setup(t)
	ctx := context.Background()
	scripts, err := filepath.Glob(filepath.Join("edges", "*.py"))
	require.NoError(t, err)
	abs, err := filepath.Abs("edges")
	require.NoError(t, err)
	var n int
	for _, script := range scripts {
		if filepath.Base(script) == "edge.py" {
			continue
		}
		n++
		script := filepath.Join(abs, filepath.Base(script))
		src, err := os.ReadFile(script)
		require.NoError(t, err)
		m := sdpConnsHeader.FindSubmatch(src)
		require.NotNilf(t, m, "%s has no '# sdp-conns: N' line", script)
		wantSDP, err := strconv.Atoi(string(m[1]))
		require.NoError(t, err)
		name := strings.TrimSuffix(filepath.Base(script), ".py")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			plain := runEdge(ctx, t, script, cleanEnv())
			for _, mode := range edgeModes {
				dir := t.TempDir()
				env := append(sdpEnv(shim, filepath.Join(dir, "edge.%p.log")), strings.Fields(mode.env)...)
				got := runEdge(ctx, t, script, env)
				if !assert.Equalf(t, plain, got, "%s: plain TCP (expected) and preloaded, mode %s", name, mode.name) {
					t.Logf("logs:\n%s", logs(dir))
					continue
				}
				c, crcErrors, _ := sumStats(t, dir, "edge")
				if !assert.EqualValuesf(t, wantSDP, c.sdp, "%s, mode %s: connection ends over SDP", name, mode.name) {
					t.Logf("logs:\n%s", logs(dir))
				}
				assert.Zero(t, crcErrors)
			}
		})
	}
	require.GreaterOrEqual(t, n, 13, "scenarios found in tests/edges")
}
