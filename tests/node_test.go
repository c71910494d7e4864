package tests

import (
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

// clusterJS is an http server run by Node's cluster module with two workers and round-robin
// scheduling: the primary accepts each connection and hands it to a worker (SCM_RIGHTS).
// Each response names the worker.
const clusterJS = `
const cluster = require('node:cluster');
const http = require('node:http');
const port = +process.argv[2];
if (cluster.isPrimary) {
  cluster.schedulingPolicy = cluster.SCHED_RR;
  for (let i = 0; i < 2; i++) cluster.fork();
  let up = 0;
  cluster.on('listening', () => { if (++up === 2) console.log('ready'); });
} else {
  http.createServer((req, res) => res.end('worker ' + process.pid + '\n')).listen(port, '127.0.0.1');
}
`

// nodeBinaries are the Node.js versions the suite runs: Debian's (20, libuv 1.46) and the
// pinned ones scripts/install-deps.sh installs (22 and 24, whose libuv registers epoll events
// through io_uring).
var nodeBinaries = []struct{ name, path string }{
	{"node20", "/usr/bin/node"},
	{"node22", "/opt/libsdp-node/22.23.3/bin/node"},
	{"node24", "/opt/libsdp-node/24.21.0/bin/node"},
}

var workerRe = regexp.MustCompile(`^worker (\d+)$`)

// TestNodeCluster: Node's cluster module (two workers, round-robin: the primary hands every
// accepted connection to a worker) serves preloaded curl and wrk over SDP on Node 20, 22 and
// 24, every response right and both workers answering.
func TestNodeCluster(t *testing.T) {
	shim, ctx := setup(t)
	js := filepath.Join(t.TempDir(), "cluster.js")
	require.NoError(t, os.WriteFile(js, []byte(clusterJS), 0o644))
	for _, nb := range nodeBinaries {
		t.Run(nb.name, func(t *testing.T) {
			dir := t.TempDir()
			dumpLogsOnFailure(t, dir)
			port := freePort(t)
			cmd := exec.CommandContext(ctx, nb.path, js, strconv.Itoa(port))
			cmd.Env = sdpEnv(shim, filepath.Join(dir, "server.%p.log"))
			cmd.WaitDelay = 10 * time.Second
			p := runProc(t, nb.name+" cluster", cmd, filepath.Join(dir, "server.out"))
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-p.done
			})
			p.waitListening(ctx, t, port, sdpPort(port))

			// The primary hands connections to the workers that have said they
			// listen; on a busy machine the second may say so a while after the
			// first: the curls go on (bounded) until both have answered.
			workers := map[string]bool{}
			for i := 0; i < 60 && (i < 6 || len(workers) < 2); i++ {
				c := exec.CommandContext(ctx, "curl", "-sS", "--noproxy", "*", "--max-time", "20",
					"http://127.0.0.1:"+strconv.Itoa(port)+"/")
				c.Env = sdpEnv(shim, filepath.Join(dir, "curl"+strconv.Itoa(i)+".%p.log"))
				b, err := c.CombinedOutput()
				require.NoError(t, err, "curl %d: %s", i, b)
				m := workerRe.FindStringSubmatch(strings.TrimSpace(string(b)))
				require.NotNil(t, m, "curl %d got %q", i, b)
				workers[m[1]] = true
				assert.EqualValues(t, 1, readStats(t, dir, "curl"+strconv.Itoa(i)).n(t, "sdp_conns"), "curl %d over SDP", i)
			}
			assert.Len(t, workers, 2, "both workers answered")

			w := exec.CommandContext(ctx, "wrk", "-t", "1", "-c", "4", "-d", "1s",
				"http://127.0.0.1:"+strconv.Itoa(port)+"/")
			w.Env = sdpEnv(shim, filepath.Join(dir, "wrk.%p.log"))
			b, err := w.CombinedOutput()
			require.NoError(t, err, "%s", b)
			assert.NotContains(t, string(b), "Socket errors", "wrk:\n%s", b)
			assert.NotContains(t, string(b), "Non-2xx", "wrk:\n%s", b)
			st := readStats(t, dir, "wrk")
			assert.GreaterOrEqual(t, st.n(t, "sdp_conns"), int64(4), "wrk's connections over SDP")
			assert.Zero(t, st.n(t, "tcp_conns"))
		})
	}
}
