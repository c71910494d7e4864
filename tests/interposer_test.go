package tests

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Interposer tests: OFED libsdp.conf rules, a connection handed to an exec'd program (the sshd
// pattern), and many threads sharing sockets and one epoll set.

// ruleTimeout bounds one rules case (both programs).
const ruleTimeout = 20 * time.Second

// echoServer listens on 127.0.0.1:PORT, prints "PORTS PORT", echoes COUNT (default 1)
// connections one after another, each until its end of stream, and prints how many bytes it
// echoed.
const echoServer = `import socket, sys
port = int(sys.argv[1])
count = int(sys.argv[2]) if len(sys.argv) > 2 else 1
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(8)
print("PORTS %d" % port, flush=True)
n = 0
for _ in range(count):
    c, _ = s.accept()
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
        n += len(b)
    c.close()
s.close()
print("served %d" % n, flush=True)
`

// echoClient sends SIZE random bytes to 127.0.0.1:PORT from a thread, reads the echo until the
// end of stream and compares. It prints "ok N" and exits 0, or prints "connect errno=E" (exit
// 3), "io errno=E" (exit 4) or "mismatch ..." (exit 5).
const echoClient = `import os, socket, sys, threading
port, size = int(sys.argv[1]), int(sys.argv[2])
data = os.urandom(size)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.connect(("127.0.0.1", port))
except OSError as e:
    print("connect errno=%d" % e.errno, flush=True)
    sys.exit(3)
err = []
def send():
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError as e:
        err.append(e)
t = threading.Thread(target=send)
t.start()
got = bytearray()
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
except OSError as e:
    err.append(e)
t.join()
s.close()
if err:
    print("io errno=%d" % err[0].errno, flush=True)
    sys.exit(4)
if bytes(got) != data:
    print("mismatch: got %d bytes, sent %d" % (len(got), len(data)), flush=True)
    sys.exit(5)
print("ok %d" % len(got), flush=True)
`

// exitCode waits for p (bounded by ctx) and returns its exit status.
func exitCode(ctx context.Context, t *testing.T, p *cprog) int {
	t.Helper()
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		t.Fatalf("%s did not finish: %v; output:\n%s", p.name, ctx.Err(), tail(p.out))
	}
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	require.Truef(t, errors.As(p.err, &ee), "%s: %v", p.name, p.err)
	return ee.ExitCode()
}

// setTitle is Python that writes over the program's argv[0], as programs that set their
// process title do (PostgreSQL's backends, nginx's workers, setproctitle): glibc's
// program_invocation_short_name points there, so a name read from it after this is the title.
const setTitle = `import ctypes
_p = ctypes.c_void_p.in_dll(ctypes.CDLL(None), "program_invocation_short_name").value
ctypes.memset(_p, ord("t"), len(ctypes.string_at(_p)))
`

// writeConf writes a rules file into dir and returns its path.
func writeConf(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// outText returns a program's output file.
func outText(t *testing.T, p *cprog) string {
	t.Helper()
	b, err := os.ReadFile(p.out)
	require.NoError(t, err)
	return string(b)
}

// ruleCase is one rules file for the client and what it must lead to.
type ruleCase struct {
	name          string
	conf          string // the client's rules file; {port}: the server's port
	serverPreload bool
	// refused: the client's connect must fail with ECONNREFUSED; otherwise the echo succeeds
	// over want.
	refused bool
	want    conns
	reason  string // the fallback reason the client logs, when want.tcp > 0
	title   bool   // the client writes over its argv[0] (setTitle) before it connects
	check   func(t *testing.T, dir, confPath, clientLog string)
}

// TestRules: OFED libsdp.conf rules read from SDP_CONFIG_FILE decide the transport of a python
// client's connection (python3 is the program name the rules match).
func TestRules(t *testing.T) {
	shim, _ := setup(t)
	const size = 256 << 10
	cases := []ruleCase{
		{
			name:          "tcp-rule",
			conf:          "# the client's connections to this server stay on TCP\nuse tcp connect python3 127.0.0.1:{port}\n",
			serverPreload: true,
			want:          conns{tcp: 1},
			reason:        "rule",
		},
		{
			// A program that sets its title is still matched by the name it was started
			// with, and its statistics carry that name.
			name:          "tcp-rule-after-title",
			conf:          "use tcp connect python3 127.0.0.1:{port}\n",
			serverPreload: true,
			title:         true,
			want:          conns{tcp: 1},
			reason:        "rule",
			check: func(t *testing.T, dir, confPath, clientLog string) {
				assert.Regexp(t, `libsdp: stats pid=\d+ prog=python3 `, clientLog)
			},
		},
		{
			// The same rule for another program does not apply.
			name:          "tcp-rule-other-program",
			conf:          "use tcp connect curl 127.0.0.1:{port}\n",
			serverPreload: true,
			want:          conns{sdp: 1},
		},
		{
			// Line 3 is wrong: the valid rule before it must not apply either.
			name:          "syntax-error",
			conf:          "# rules\nuse tcp connect * 127.0.0.1:{port}\nuse maybe server * *:*\n",
			serverPreload: true,
			want:          conns{sdp: 1},
			check: func(t *testing.T, dir, confPath, clientLog string) {
				re := regexp.MustCompile(`(?m)^.*` + regexp.QuoteMeta(confPath) + `:3:.*$`)
				lines := re.FindAllString(clientLog, -1)
				assert.Lenf(t, lines, 1, "one log line names %s:3; log:\n%s", confPath, clientLog)
				assert.NotContainsf(t, clientLog, confPath+":2:", "the valid line 2 is not reported")
			},
		},
		{
			name:    "sdp-rule-plain-server",
			conf:    "use sdp connect * *:*\n",
			refused: true,
		},
		{
			// The same pair with both allowed falls back to TCP: the refusal above is the rule's.
			name: "both-rule-plain-server",
			conf: "use both connect * *:*\n",
			want: conns{tcp: 1},
		},
		{
			name:    "no-use-rule-plain-server",
			conf:    "# no use statement: everything is sdp\n\nlog min-level 5\n",
			refused: true,
		},
	}
	for _, rc := range cases {
		t.Run(rc.name, func(t *testing.T) {
			runRuleCase(t, shim, rc, size)
		})
	}
}

func runRuleCase(t *testing.T, shim string, rc ruleCase, size int) {
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), ruleTimeout)
	t.Cleanup(cancel)
	port := freePort(t)
	conf := writeConf(t, dir, "client.conf", strings.ReplaceAll(rc.conf, "{port}", strconv.Itoa(port)))
	// The server's own rules file leaves everything to the default, whatever /etc holds.
	srvConf := writeConf(t, dir, "server.conf", "use both server * *:*\nuse both connect * *:*\n")

	srvEnv := append(cleanEnv(), "SDP_CONFIG_FILE="+srvConf)
	if rc.serverPreload {
		srvEnv = append(sdpEnv(shim, filepath.Join(dir, "server.%p.log")), "SDP_CONFIG_FILE="+srvConf)
	}
	srv := startC(ctx, t, dir, "server", srvEnv, python, "-c", echoServer, strconv.Itoa(port))
	ports := srv.waitPorts(t)
	require.Equal(t, []string{strconv.Itoa(port)}, ports)

	cliEnv := append(sdpEnv(shim, filepath.Join(dir, "client.%p.log")), "SDP_CONFIG_FILE="+conf)
	script := echoClient
	if rc.title {
		script = setTitle + script
	}
	cli := startC(ctx, t, dir, "client", cliEnv, python, "-c", script, strconv.Itoa(port), strconv.Itoa(size))
	code := exitCode(ctx, t, cli)
	out := outText(t, cli)
	clientLog := logText(t, dir, "client")

	if rc.refused {
		require.Equalf(t, 3, code, "the client's connect must fail (ECONNREFUSED) instead of falling back; output:\n%s", out)
		assert.Containsf(t, out, fmt.Sprintf("connect errno=%d", int(syscall.ECONNREFUSED)), "client output")
		// The server's first connection is this probe: the client's never reached it.
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
		require.NoError(t, err)
		_, err = c.Write([]byte("probe"))
		require.NoError(t, err)
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		echo := make([]byte, 16)
		n, _ := c.Read(echo)
		c.Close()
		assert.Equal(t, "probe", string(echo[:n]), "the server echoes the probe")
		require.Zero(t, exitCode(ctx, t, srv), "server")
		assert.Contains(t, outText(t, srv), "served 5\n", "the server's only connection was the probe")
		c2, _, lines := sumStats(t, dir, "client")
		require.Positive(t, lines, "the client wrote a stats line")
		assert.Zero(t, c2.sdp, "client connections over SDP")
		return
	}

	require.Equalf(t, 0, code, "client output:\n%s", out)
	assert.Containsf(t, out, fmt.Sprintf("ok %d", size), "client output")
	require.Zero(t, exitCode(ctx, t, srv), "server")
	assert.Contains(t, outText(t, srv), fmt.Sprintf("served %d\n", size))

	want := rc.want
	checkTransport(t, dir, "client", &want)
	if want.sdp > 0 {
		assert.Contains(t, clientLog, "transport=sdp")
		assert.NotContains(t, clientLog, "transport=tcp")
	}
	if rc.reason != "" {
		assert.Regexp(t, `transport=tcp reason=`+rc.reason+`\b`, clientLog)
	}
	if rc.serverPreload {
		checkTransport(t, dir, "server", &want)
	}
	if rc.check != nil {
		rc.check(t, dir, conf, clientLog)
	}
}

// pairConfig says which ends of a C program pair run under libsdp.
type pairConfig struct {
	name                         string
	serverPreload, clientPreload bool
	env                          []string // more settings of the preloaded sides
}

var pairConfigs = []pairConfig{
	{name: "sdp", serverPreload: true, clientPreload: true},
	{name: "plain"},
	{name: "client-preloaded", clientPreload: true},
	{name: "server-preloaded", serverPreload: true},
}

// runPair runs tests/c/<prog> as server and client (capi.h conventions), checks that both
// exited 0 and returns the directory holding their output and logs.
func runPair(t *testing.T, shim, bin string, cfg pairConfig, timeout time.Duration) string {
	t.Helper()
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	env := func(preload bool, prefix string) []string {
		e := cleanEnv()
		if preload {
			e = append(sdpEnv(shim, filepath.Join(dir, prefix+".%p.log")), cfg.env...)
		}
		return append(e, "TMPDIR="+dir)
	}
	srv := startC(ctx, t, dir, "server", env(cfg.serverPreload, "server"), bin, "server", "-")
	ports := srv.waitPorts(t)
	cli := startC(ctx, t, dir, "client", env(cfg.clientPreload, "client"), bin,
		append([]string{"client", "-"}, ports...)...)
	cli.wait(ctx, t)
	srv.wait(ctx, t)
	require.False(t, t.Failed(), "the programs failed")
	return dir
}

// TestEngineKeepsDefaultPs: processes whose one thread uses the engine keep the runtime's
// default Ps (the CPUs), which leave one idle for the engine's goroutines, on a machine of two
// CPUs or more: changing them stops the world during the process's first connection
// (preload/procs.go). On one CPU the engine adds the second.
func TestEngineKeepsDefaultPs(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	port := freePort(t)
	env := func(side string) []string {
		return append(sdpEnv(shim, filepath.Join(dir, side+".%p.log")), "SDP_LOG_LEVEL=debug")
	}
	srv := startC(ctx, t, dir, "server", env("server"), python, "-c", echoServer, strconv.Itoa(port), "1")
	require.Equal(t, []string{strconv.Itoa(port)}, srv.waitPorts(t))
	cli := startC(ctx, t, dir, "client", env("client"), python, "-c", shortClient, strconv.Itoa(port), "100000")
	require.Zero(t, exitCode(ctx, t, cli), "client: %s", outText(t, cli))
	require.Zero(t, exitCode(ctx, t, srv), "server: %s", outText(t, srv))
	re := regexp.MustCompile(`runtime: (\d+) Ps for (\d+) application threads`)
	for _, side := range []string{"server", "client"} {
		log := logText(t, dir, side)
		require.Contains(t, log, "engine started", "%s: the engine ran", side)
		m := re.FindAllStringSubmatch(log, -1)
		if runtime.NumCPU() >= 2 {
			assert.Emptyf(t, m, "%s: Ps changed for one thread on %d CPUs", side, runtime.NumCPU())
		} else if assert.Lenf(t, m, 1, "%s: one change of the Ps on one CPU", side) {
			assert.Equal(t, []string{m[0][0], "2", "1"}, m[0], side)
		}
	}
}

// TestEnginePsFollowThreads: the engine's runtime gets a P for each application thread that
// uses it, and one more, the runtime's default (the CPUs) at least (preload/procs.go):
// tests/c/threads.c runs 16 worker threads on each side, and its main thread connects or
// accepts. A thread that found every P kept by another would wait for the runtime's monitor to
// take one back.
func TestEnginePsFollowThreads(t *testing.T) {
	shim, ctx := setup(t)
	bins := compileC(ctx, t, t.TempDir(), []family{{prog: "threads"}})
	cfg := pairConfig{name: "sdp", serverPreload: true, clientPreload: true, env: []string{"SDP_LOG_LEVEL=debug"}}
	dir := runPair(t, shim, bins["threads"], cfg, runTimeout)
	re := regexp.MustCompile(`runtime: (\d+) Ps for (\d+) application threads`)
	for _, side := range []string{"server", "client"} {
		m := re.FindAllStringSubmatch(logText(t, dir, side), -1)
		require.NotEmptyf(t, m, "%s: the engine says how many Ps it keeps", side)
		last := m[len(m)-1]
		ps, _ := strconv.Atoi(last[1])
		threads, _ := strconv.Atoi(last[2])
		assert.GreaterOrEqualf(t, threads, 16, "%s: application threads that used the engine", side)
		// preload/procs.go: the CPUs at least, 64 at most
		assert.Equalf(t, min(max(runtime.NumCPU(), threads+1), 64), ps, "%s: Ps for %d threads", side, threads)
	}
}

// TestExec: a server accepts a connection, forks, and the child dup2()s it onto 0 and 1 and
// execs /bin/sh -c 'read line; echo got:$line' (the sshd pattern). The client sends "ping\n"
// and must read exactly "got:ping\n" (tests/c/execpass.c), over SDP when both ends are
// preloaded.
func TestExec(t *testing.T) {
	shim, ctx := setup(t)
	bins := compileC(ctx, t, t.TempDir(), []family{{prog: "execpass"}})
	for _, cfg := range pairConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			dir := runPair(t, shim, bins["execpass"], cfg, runTimeout)
			switch {
			case cfg.serverPreload && cfg.clientPreload:
				c := readStats(t, dir, "client")
				assert.EqualValues(t, 1, c.n(t, "sdp_conns"), "client connections over SDP")
				assert.EqualValues(t, 0, c.n(t, "tcp_conns"), "client connections over TCP")
				assert.EqualValues(t, 5, c.n(t, "payload_tx"), "bytes the client sent over SDP")
				assert.EqualValues(t, 9, c.n(t, "payload_rx"), "bytes the client received over SDP")
				assert.EqualValues(t, 0, c.n(t, "crc_errors"))
				s, _, lines := sumStats(t, dir, "server")
				assert.Positive(t, lines, "the server wrote a stats line")
				assert.Zero(t, s.tcp, "server connections over TCP")
			case cfg.clientPreload:
				checkTransport(t, dir, "client", &conns{tcp: 1})
			case cfg.serverPreload:
				checkTransport(t, dir, "server", &conns{tcp: 1})
			default:
				checkTransport(t, dir, "client", nil)
				checkTransport(t, dir, "server", nil)
			}
		})
	}
}

// threadsMsgs is the number of requests (and replies) tests/c/threads.c exchanges: 16 threads
// of 1500 requests each.
const threadsMsgs = 16 * 1500

// TestThreads: 16 threads on each side share 4 connections and one epoll set (EPOLLIN |
// EPOLLET | EPOLLONESHOT, re-armed with EPOLL_CTL_MOD), checking every message
// (tests/c/threads.c).
func TestThreads(t *testing.T) {
	shim, ctx := setup(t)
	bins := compileC(ctx, t, t.TempDir(), []family{{prog: "threads"}})
	for _, cfg := range pairConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			dir := runPair(t, shim, bins["threads"], cfg, runTimeout)
			for _, side := range []struct{ name, word string }{{"server", "requests"}, {"client", "replies"}} {
				b, err := os.ReadFile(filepath.Join(dir, side.name+".out"))
				require.NoError(t, err)
				m := regexp.MustCompile(side.word + `=(\d+)`).FindStringSubmatch(string(b))
				if assert.NotNilf(t, m, "%s reports its count; output:\n%s", side.name, b) {
					assert.Equalf(t, strconv.Itoa(threadsMsgs), m[1], "%s %s", side.name, side.word)
				}
				assert.Falsef(t, strings.Contains(string(b), "FAIL"), "%s output:\n%s", side.name, b)
			}
			n := int64(4)
			switch {
			case cfg.serverPreload && cfg.clientPreload:
				checkTransport(t, dir, "client", &conns{sdp: n})
				checkTransport(t, dir, "server", &conns{sdp: n})
			case cfg.clientPreload:
				checkTransport(t, dir, "client", &conns{tcp: n})
				checkTransport(t, dir, "server", nil)
			case cfg.serverPreload:
				checkTransport(t, dir, "server", &conns{tcp: n})
				checkTransport(t, dir, "client", nil)
			default:
				checkTransport(t, dir, "client", nil)
				checkTransport(t, dir, "server", nil)
			}
		})
	}
}
