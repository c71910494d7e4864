package reliability

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// relprog is the path of the compiled tests/reliability/c/relprog.c, built once by TestMain.
var relprog string

// shim is the absolute path of build/libsdp.so.
var shim string

func TestMain(m *testing.M) {
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shim = filepath.Join(root, "build", "libsdp.so")
	for _, f := range []string{shim, filepath.Join(root, "build", "libsdp-engine.so")} {
		if _, err := os.Stat(f); err != nil {
			fmt.Fprintf(os.Stderr, "%s is missing: run make first\n", f)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "relprog")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	relprog = filepath.Join(dir, "relprog")
	out, err := exec.Command("gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-g", "-pthread",
		"-o", relprog, filepath.Join(root, "tests", "reliability", "c", "relprog.c")).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "compiling relprog.c: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cleanEnv is this process's environment without LD_PRELOAD and libsdp's settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LD_PRELOAD" || strings.HasPrefix(k, "SDP_") || strings.HasPrefix(k, "LIBSDP_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// sdpEnv is the environment of a preloaded process logging to dir/name.<pid>.log, plus extra.
// overWire keeps a connection's bytes on its TCP socket, for the tests whose
// relay stands for the network between two hosts (damage, resets, delays):
// between two processes of this host, shared memory would carry them past it.
const overWire = "SDP_SHM=0"

func sdpEnv(dir, name string, extra ...string) []string {
	return append(append(cleanEnv(), "LD_PRELOAD="+shim, "SDP_STATS=1", "SDP_LOG_LEVEL=info",
		"SDP_LOG_FILE="+filepath.Join(dir, name+".%p.log")), extra...)
}

// prog is a running relprog (or another program) whose stdout lines are collected.
type prog struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced whenever a line arrives
	done  chan struct{}
	err   error
}

// start runs bin with args and env (nil: the clean environment), in its own process group,
// killed at the end of the test.
func start(t *testing.T, name string, env []string, bin string, args ...string) *prog {
	t.Helper()
	return startIn(t, name, env, nil, bin, args...)
}

// startIn is start with a command prefix (such as ip netns exec NS).
func startIn(t *testing.T, name string, env, prefix []string, bin string, args ...string) *prog {
	t.Helper()
	if env == nil {
		env = cleanEnv()
	}
	argv := append(append(append([]string{}, prefix...), bin), args...)
	p := &prog{name: name, more: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = env
	p.cmd.Stderr = &lineWriter{p: p, prefix: "stderr: "}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.stdin, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			p.add(sc.Text())
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		<-copied
		p.err = p.cmd.Wait()
		close(p.done)
		p.mu.Lock()
		close(p.more)
		p.more = nil
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, p.output())
		}
	})
	return p
}

type lineWriter struct {
	p      *prog
	prefix string
	buf    []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			return len(b), nil
		}
		w.p.add(w.prefix + string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

func (p *prog) add(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, line)
	if p.more != nil {
		close(p.more)
		p.more = make(chan struct{})
	}
}

func (p *prog) pid() int { return p.cmd.Process.Pid }

func (p *prog) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill ends the process group with SIGKILL and waits for it.
func (p *prog) kill() {
	if !p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// wait waits at most d for the process to exit and reports whether it did.
func (p *prog) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

func (p *prog) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.lines
	if len(out) > 200 {
		out = append(append([]string{}, out[:100]...), append([]string{"..."}, out[len(out)-100:]...)...)
	}
	return strings.Join(out, "\n")
}

// matching returns the lines that match re.
func (p *prog) matching(re *regexp.Regexp) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var m []string
	for _, l := range p.lines {
		if re.MatchString(l) {
			m = append(m, l)
		}
	}
	return m
}

// waitLines waits at most d until n lines match re, and returns them (fewer on timeout or exit).
func (p *prog) waitLines(re *regexp.Regexp, n int, d time.Duration) []string {
	deadline := time.After(d)
	for {
		p.mu.Lock()
		more := p.more
		p.mu.Unlock()
		if m := p.matching(re); len(m) >= n || more == nil {
			return m
		}
		select {
		case <-more:
		case <-deadline:
			return p.matching(re)
		}
	}
}

// waitLine waits for one line matching re and fails the test without it.
func (p *prog) waitLine(t *testing.T, re *regexp.Regexp, d time.Duration) string {
	t.Helper()
	m := p.waitLines(re, 1, d)
	if len(m) == 0 {
		t.Fatalf("%s: no line matching %q within %v (exited: %v, %v); output:\n%s", p.name, re, d,
			p.exited(), p.err, p.output())
	}
	return m[0]
}

var portsRe = regexp.MustCompile(`^PORTS (\d+)`)

// port waits for the PORTS line of a server.
func (p *prog) port(t *testing.T) int {
	t.Helper()
	m := portsRe.FindStringSubmatch(p.waitLine(t, portsRe, 10*time.Second))
	n, _ := strconv.Atoi(m[1])
	return n
}

// freePort is a port P, chosen by the kernel, whose SDP port is free too
// right now: a preloaded listener on P needs both, and the suites running
// beside this one hold many ports; an SDP port that is busy (an ephemeral
// port of some connection) leaves the listener serving TCP only, which
// these tests are not about. The SDP port is probed as the shim binds its
// twin, with SO_REUSEADDR.
func freePort(t *testing.T) string {
	t.Helper()
	probe := func(port int, reuse bool) (int, bool) {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		defer syscall.Close(fd)
		if reuse {
			require.NoError(t, syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1))
		}
		if syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}) != nil {
			return 0, false
		}
		sa, err := syscall.Getsockname(fd)
		require.NoError(t, err)
		return sa.(*syscall.SockaddrInet4).Port, true
	}
	for i := 0; i < 500; i++ {
		p, ok := probe(0, false)
		require.True(t, ok, "bind to port 0")
		if _, ok := probe(sdpPort(p, 20000), true); ok {
			return strconv.Itoa(p)
		}
	}
	t.Fatal("no port whose SDP port is free too, in 500 tries")
	return ""
}

// sdpPort is the SDP port for application port p with the given offset.
func sdpPort(p, offset int) int {
	const span = 65536 - 1024
	return ((p-1024+offset)%span+span)%span + 1024
}

// waitListening waits, without connecting, until port has a listener (from /proc/net/tcp*).
func waitListening(t *testing.T, port int, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	want := fmt.Sprintf(":%04X ", port)
	for time.Now().Before(end) {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			for _, l := range strings.Split(string(b), "\n") {
				fs := strings.Fields(l)
				if len(fs) > 3 && fs[3] == "0A" && strings.HasSuffix(fs[1]+" ", want) {
					return
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("nothing listens on port %d after %v", port, d)
}

// rssKiB is the resident memory of a process, in KiB.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	require.NotNil(t, m, "VmRSS of %d", pid)
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// fdCount is the number of open descriptors of a process.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	return len(es)
}

// statsOf returns the key=value pairs of the "libsdp: stats" lines in dir/name.*.log, summed.
func statsOf(t *testing.T, dir, name string) map[string]int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, name+".*.log"))
	require.NoError(t, err)
	sum := map[string]int64{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "libsdp: stats ") {
				continue
			}
			for _, kv := range strings.Fields(line) {
				k, v, ok := strings.Cut(kv, "=")
				if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
					sum[k] += n
				}
			}
		}
	}
	return sum
}

// logText is the content of every dir/name.*.log file.
func logText(t *testing.T, dir, name string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, name+".*.log"))
	require.NoError(t, err)
	var sb strings.Builder
	for _, f := range files {
		b, _ := os.ReadFile(f)
		sb.Write(b)
	}
	return sb.String()
}

// stopGently sends SIGINT so that a preloaded program writes its statistics, then waits (bounded).
func (p *prog) stopGently(d time.Duration) {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	if !p.wait(d) {
		p.kill()
	}
}

// testCtx is a context bounded by d and the test's life.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// logDir is a temporary directory for the libsdp logs of a test, printed when the test fails.
func logDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if len(b) > 8000 {
				b = append(b[:4000:4000], append([]byte("\n...\n"), b[len(b)-4000:]...)...)
			}
			t.Logf("%s:\n%s", filepath.Base(f), b)
		}
	})
	return dir
}

func itoa(n int) string { return strconv.Itoa(n) }
