package tests

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// sharedWaitServer sends one octet, then a second one after a second of silence.
const sharedWaitServer = `
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
c, _ = s.accept()
c.sendall(b"a")
time.sleep(1)
c.sendall(b"b")
c.recv(1)
`

// sharedWaitClient has a second thread wait on the connection first, then
// blocks its main thread in recv through the server's second of silence and
// says how often that thread woke meanwhile (its voluntary context switches).
const sharedWaitClient = `
import resource, socket, sys, threading
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
got = []
t = threading.Thread(target=lambda: got.append(s.recv(1))); t.start(); t.join()
r0 = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
d = s.recv(1)
r1 = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
print("WOKE", r1 - r0, (got[0] + d).decode())
s.close()
`

// TestSharedWaitSleeps: a thread blocked on a connection that another thread
// of its process has waited on too sleeps until something arrives, as over
// TCP. Each thread sleeps on an eventfd of its own, which the engine rings
// for it; such waits were bounded at 10 ms, when those threads shared the
// connection's eventfd and one could take another's wake-up, and the
// thread then woke about 100 times in the second.
func TestSharedWaitSleeps(t *testing.T) {
	shim, ctx := setup(t)
	for _, c := range []struct {
		name    string
		preload bool
	}{{"tcp", false}, {"sdp", true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			defer dumpLogsOnFailure(t, dir)
			sh := ""
			if c.preload {
				sh = shim
			}
			port := freePort(t)
			srv := startPython(ctx, t, "server", procEnv(sh, filepath.Join(dir, "server.%p.log")),
				filepath.Join(dir, "server.out"), "-c", sharedWaitServer, strconv.Itoa(port))
			ports := []int{port}
			if c.preload {
				ports = append(ports, sdpPort(port))
			}
			srv.waitListening(ctx, t, ports...)
			cli := startPython(ctx, t, "client", procEnv(sh, filepath.Join(dir, "client.%p.log")),
				filepath.Join(dir, "client.out"), "-c", sharedWaitClient, strconv.Itoa(port))
			out := cli.finish(ctx, t)
			m := regexp.MustCompile(`WOKE (\d+) (\w+)`).FindStringSubmatch(out)
			require.NotNil(t, m, out)
			require.Equal(t, "ab", m[2], "both octets, in order")
			woke, _ := strconv.Atoi(m[1])
			t.Logf("the blocked thread woke %d times in the second", woke)
			require.LessOrEqual(t, woke, 10, "a thread blocked on a connection another thread used wakes only for what arrives")
			if c.preload {
				require.Contains(t, logText(t, dir, "client"), "transport=sdp", "the connection went over SDP")
			}
		})
	}
}
