package tests

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// forkingServer accepts one connection, forks a child for it and closes its own descriptor, as
// PostgreSQL's postmaster and inetd-style servers do; the child answers each octet with one from
// an epoll loop (the connection alone in its set), prints "child PID" and exits at the end of
// the stream; the parent waits for it.
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
    print("child %d" % os.getpid(), flush=True)
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
    c.close()
    sys.exit(0)
c.close()
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
`

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

// TestForkedChildWaitPolls: a connection accepted by a listener that forked a child to serve it
// is the child's alone once the child's engine has taken it (the parent closed its copy, and
// could no longer use it anyway): the child's epoll wait polls its shared memory before it
// sleeps, as it would for a connection it accepted itself, where every answer used to ring a
// doorbell and wake it from sleep (shm_set_polls=0 in PostgreSQL's backends).
func TestForkedChildWaitPolls(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	const pings = 2000
	port := freePort(t)
	srv := startC(ctx, t, dir, "server", append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), "SDP_SHM=1"),
		python, "-c", forkingServer, strconv.Itoa(port))
	require.Equal(t, []string{strconv.Itoa(port)}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "client", append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), "SDP_SHM=1"),
		python, "-c", pingClient, strconv.Itoa(port), strconv.Itoa(pings))
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))
	m := regexp.MustCompile(`child (\d+)`).FindStringSubmatch(outText(t, srv))
	require.NotNil(t, m, "server: %s", outText(t, srv))
	// The child's statistics line (its log is the parent's file, inherited, or its own).
	stats := regexp.MustCompile(`(?m)^.*stats pid=` + m[1] + ` .*$`).FindString(logText(t, dir, "server"))
	require.Regexp(t, regexp.MustCompile(`shm_conns=1 `), stats, "the child's connection ran over shared memory")
	polls := regexp.MustCompile(`shm_set_polls=(\d+) `).FindStringSubmatch(stats)
	require.NotNil(t, polls, "the child's statistics line:\n%s", stats)
	n, _ := strconv.Atoi(polls[1])
	t.Logf("the child's epoll waits polled %d times for %d answers", n, pings)
	require.Positive(t, n, "the child's waits polled its connection before sleeping")
}

// forkAfterServer accepts one connection and answers its first octet, forks a child that exits at
// once (as redis-server's BGSAVE child does, which never touches its clients), waits for it, then
// answers each further octet from an epoll loop until the end of the stream.
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
c.close()
`

// TestWaitPollsAfterFork: a connection this process's engine had taken before it forked a child
// stays its alone (the child cannot drive it): the epoll wait that serves it afterwards polls
// shared memory, where a fork made every connection older than it ring a doorbell per answer for
// good (redis-server's clients after its first BGSAVE).
func TestWaitPollsAfterFork(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	const pings = 2000
	port := freePort(t)
	srv := startC(ctx, t, dir, "server", append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), "SDP_SHM=1"),
		python, "-c", forkAfterServer, strconv.Itoa(port))
	require.Equal(t, []string{strconv.Itoa(port)}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "client", append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), "SDP_SHM=1"),
		python, "-c", pingClient, strconv.Itoa(port), strconv.Itoa(pings))
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))
	stats := regexp.MustCompile(`(?m)^.*stats pid=\d+ prog=python3 .*shm_conns=1 .*$`).FindString(logText(t, dir, "server"))
	require.NotEmpty(t, stats, "the server's statistics line:\n%s", logText(t, dir, "server"))
	polls := regexp.MustCompile(`shm_set_polls=(\d+) `).FindStringSubmatch(stats)
	require.NotNil(t, polls, "the server's statistics line:\n%s", stats)
	n, _ := strconv.Atoi(polls[1])
	t.Logf("the server's epoll waits after the fork polled %d times for %d answers", n, pings)
	require.Positive(t, n, "the waits after the fork polled the connection before sleeping")
}
