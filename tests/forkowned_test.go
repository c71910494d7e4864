package tests

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// forkingServer accepts one connection, forks a child for it and closes its own descriptor, as
// PostgreSQL's postmaster and inetd-style servers do; the child serves it (epollEcho).
const forkingServer = `import os, select, socket, sys
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(8)
print("PORTS %d" % port, flush=True)
c, _ = s.accept()
pid = os.fork()
if pid == 0:
    s.close()
` + epollEcho + `
    sys.exit(0)
c.close()
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
`

// forkAfterServer accepts one connection and answers its first octet, forks a child that exits at
// once (as redis-server's BGSAVE child does, which never touches its clients), waits for it, then
// serves the connection (epollEcho).
const forkAfterServer = `import os, select, socket, sys
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(8)
print("PORTS %d" % port, flush=True)
c, _ = s.accept()
c.sendall(c.recv(1))
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
if True:
` + epollEcho

// epollEcho (indented into an if-block of the scripts above) prints "serving PID" and answers
// each octet on c from an epoll loop, c alone in its set, until the end of the stream.
const epollEcho = `    print("serving %d" % os.getpid(), flush=True)
    c.setblocking(False)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN)
    done = False
    while not done:
        for _ in ep.poll(20):
            b = c.recv(256)
            if not b:
                done = True
                break
            c.sendall(b)
    c.close()`

// pingClient sends argv[2] single octets one after another, each after the answer to the last.
const pingClient = `import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
c = socket.create_connection(("127.0.0.1", port))
for i in range(n):
    c.sendall(bytes([i % 256]))
    assert c.recv(1) == bytes([i % 256]), i
c.close()
print("ok", flush=True)
`

// servingPolls runs server (a script above) against pingClient's pings, both preloaded, and
// returns how often the epoll waits of the process that served the connection polled its shared
// memory before sleeping (shm_set_polls of its statistics line).
func servingPolls(t *testing.T, server string, pings int) int {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	port := freePort(t)
	srv := startC(ctx, t, dir, "server", append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), "SDP_SHM=1"),
		python, "-c", server, strconv.Itoa(port))
	require.Equal(t, []string{strconv.Itoa(port)}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "client", append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), "SDP_SHM=1"),
		python, "-c", pingClient, strconv.Itoa(port), strconv.Itoa(pings))
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))
	m := regexp.MustCompile(`serving (\d+)`).FindStringSubmatch(outText(t, srv))
	require.NotNil(t, m, "server: %s", outText(t, srv))
	// Its statistics line (a forked child's log is its parent's file, inherited, or its own).
	logs := logText(t, dir, "server")
	stats := regexp.MustCompile(`(?m)^.*stats pid=` + m[1] + ` .*$`).FindString(logs)
	require.Regexp(t, regexp.MustCompile(`shm_conns=1 `), stats, "the connection ran over shared memory:\n%s", logs)
	polls := regexp.MustCompile(`shm_set_polls=(\d+) `).FindStringSubmatch(stats)
	require.NotNil(t, polls, "the statistics line:\n%s", stats)
	n, _ := strconv.Atoi(polls[1])
	t.Logf("the serving process's epoll waits polled %d times for %d answers", n, pings)
	return n
}

// TestForkedChildWaitPolls: a connection accepted by a listener that forked a child to serve it
// is the child's alone once the child's engine has taken it (the parent closed its copy, and
// could no longer use it anyway): the child's epoll wait polls its shared memory before it
// sleeps, as it would for a connection it accepted itself, where every answer used to ring a
// doorbell and wake it from sleep (shm_set_polls=0 in PostgreSQL's backends).
func TestForkedChildWaitPolls(t *testing.T) {
	require.Positive(t, servingPolls(t, forkingServer, 2000), "the child's waits polled before sleeping")
}

// TestWaitPollsAfterFork: a connection this process's engine had taken before it forked a child
// stays its alone (the child cannot drive it): the epoll wait that serves it afterwards polls
// shared memory, where a fork made every connection older than it ring a doorbell per answer for
// good (redis-server's clients after its first BGSAVE).
func TestWaitPollsAfterFork(t *testing.T) {
	require.Positive(t, servingPolls(t, forkAfterServer, 2000), "the waits after the fork polled before sleeping")
}
