package tests

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	python = "/usr/bin/python3"
	// caseTimeout bounds each test case as a whole: processes still running then are stopped.
	caseTimeout = 3 * time.Minute
	// portOffset is SDP_PORT_OFFSET's default: the SDP listener for port P is on P+portOffset.
	portOffset = 20000
)

// setup checks what every case needs and returns the absolute path of build/libsdp.so and a
// context that ends after caseTimeout.
func setup(t *testing.T) (shim string, ctx context.Context) {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	shim = filepath.Join(root, "build", "libsdp.so")
	for _, f := range []string{shim, filepath.Join(root, "build", "libsdp-engine.so")} {
		_, err := os.Stat(f)
		require.NoErrorf(t, err, "%s is missing: run make first", f)
	}
	_, err = os.Stat(python)
	require.NoErrorf(t, err, "%s is missing: run make deps", python)
	_, err = exec.LookPath("curl")
	require.NoError(t, err, "curl is missing: run make deps")
	_, err = exec.LookPath("env")
	require.NoError(t, err, "env (coreutils) is missing")

	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	t.Cleanup(cancel)
	return shim, ctx
}

// makeFile writes size random bytes to dir/name and returns the file's SHA-256.
func makeFile(t *testing.T, dir, name string, size int64) string {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.CopyN(io.MultiWriter(f, h), rand.Reader, size)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return hex.EncodeToString(h.Sum(nil))
}

// fileSHA returns the SHA-256 of a file, or a description of why there is none.
func fileSHA(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unreadable: " + err.Error()
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sdpPort is the TCP port of the SDP listener for application port p: p+offset wrapped into
// 1024..65535.
func sdpPort(p int) int {
	const span = 65536 - 1024
	return ((p-1024+portOffset)%span+span)%span + 1024
}

// freePort returns a port P, chosen by the kernel, such that P and its SDP port (P+offset,
// without wrapping) are both free on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	for range 500 {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		p := l.Addr().(*net.TCPAddr).Port
		if p+portOffset > 65535 {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p+portOffset))
		l.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return p
	}
	t.Fatal("no free pair of ports found")
	return 0
}

// listeningPorts returns the local TCP ports in LISTEN state (IPv4 and IPv6), read from /proc
// so that waiting for a server opens no connection to it.
func listeningPorts() (map[int]bool, error) {
	ports := map[int]bool{}
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ...; local_address is HEXADDR:HEXPORT, st 0A is LISTEN.
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" {
				continue
			}
			i := strings.LastIndexByte(fields[1], ':')
			if i < 0 {
				continue
			}
			if p, err := strconv.ParseUint(fields[1][i+1:], 16, 16); err == nil {
				ports[int(p)] = true
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// proc is a background process stopped at the end of the test: SIGINT first (python then exits
// normally, so libsdp writes its statistics), SIGKILL if it is still running 10 s later.
type proc struct {
	name     string
	cmd      *exec.Cmd
	out      string
	done     chan struct{}
	err      error
	stopOnce sync.Once
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop interrupts the process and waits (bounded) for it to exit.
func (p *proc) stop() {
	p.stopOnce.Do(func() {
		if !p.exited() {
			_ = p.cmd.Process.Signal(os.Interrupt)
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// buildTestC compiles tests/c/src (with libs) into the test's temporary directory and returns
// the program's path.
func buildTestC(ctx context.Context, t *testing.T, src string, libs ...string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(src, ".c"))
	args := append([]string{"-O2", "-Wall", "-D_GNU_SOURCE", "-o", bin, filepath.Join(root, "tests", "c", src)}, libs...)
	out, err := exec.CommandContext(ctx, "gcc", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// forEachMode runs f as a subtest in every flow-control and progress mode (and, withBuffering,
// every buffering mode), named like credit-separate-async; mode is its environment and i its
// index, from 0.
func forEachMode(t *testing.T, withBuffering bool, f func(t *testing.T, i int, mode []string)) {
	t.Helper()
	names, envs := flowProgressModes(withBuffering)
	for i, name := range names {
		t.Run(name, func(t *testing.T) { f(t, i, envs[i]) })
	}
}

// flowProgressModes are the environments of every flow-control and progress mode, each with
// its name, with buffering too when withBuffering.
func flowProgressModes(withBuffering bool) (names []string, envs [][]string) {
	bufferings := []string{""}
	if withBuffering {
		bufferings = []string{"integrated", "separate"}
	}
	for _, flow := range []string{"credit", "rdma", "nic", "transport"} {
		for _, buffering := range bufferings {
			for _, progress := range []string{"inline", "async"} {
				name, env := []string{flow}, []string{"SDP_FLOW_CONTROL=" + flow}
				if buffering != "" {
					name, env = append(name, buffering), append(env, "SDP_BUFFERING="+buffering)
				}
				names = append(names, strings.Join(append(name, progress), "-"))
				envs = append(envs, append(env, "SDP_PROGRESS="+progress))
			}
		}
	}
	return names, envs
}

// finish waits for the process to end by itself, requires a clean exit, and returns its output.
func (p *proc) finish(ctx context.Context, t *testing.T) string {
	t.Helper()
	select {
	case <-p.done:
	case <-ctx.Done():
		t.Fatalf("%s did not finish: %v", p.name, ctx.Err())
	}
	require.NoError(t, p.err, "%s", tail(p.out))
	b, err := os.ReadFile(p.out)
	require.NoError(t, err)
	return string(b)
}

// waitListening polls, without connecting, until every port has a listener.
func (p *proc) waitListening(ctx context.Context, t *testing.T, ports ...int) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ls, err := listeningPorts()
		require.NoError(t, err)
		missing := []int{}
		for _, port := range ports {
			if !ls[port] {
				missing = append(missing, port)
			}
		}
		if len(missing) == 0 {
			return
		}
		if p.exited() {
			t.Fatalf("%s exited (%v) before listening on %v; output:\n%s", p.name, p.err, missing, tail(p.out))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: nothing listens on %v: %v", p.name, missing, ctx.Err())
		case <-tick.C:
		}
	}
}

// cleanEnv is this process's environment without LD_PRELOAD, SDP_* and proxy settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "LD_PRELOAD", strings.HasPrefix(k, "SDP_"), strings.HasPrefix(k, "LIBSDP_"),
			strings.HasSuffix(strings.ToLower(k), "_proxy"):
			continue
		}
		env = append(env, kv)
	}
	return env
}

// sdpEnv is the environment of a preloaded process logging to logFile (%p: the pid).
func sdpEnv(shim, logFile string) []string {
	return append(cleanEnv(), "LD_PRELOAD="+shim, "SDP_STATS=1", "SDP_LOG_LEVEL=info",
		"SDP_LOG_FILE="+logFile)
}

// procEnv returns sdpEnv when shim is set and cleanEnv otherwise.
func procEnv(shim, logFile string) []string {
	if shim == "" {
		return cleanEnv()
	}
	return sdpEnv(shim, logFile)
}

// startServer runs `python3 -m http.server` on 127.0.0.1:port serving dir, preloaded with shim
// unless shim is "", logging to logDir/server.<pid>.log, and waits until it listens (on the
// SDP port too when preloaded).
func startServer(ctx context.Context, t *testing.T, shim, dir, logDir string, port int) *proc {
	t.Helper()
	return startServerOn(ctx, t, shim, dir, logDir, port, true)
}

// startServerOn is startServer; withSDP false waits for the application port only (the SDP
// port is someone else's).
func startServerOn(ctx context.Context, t *testing.T, shim, dir, logDir string, port int, withSDP bool) *proc {
	t.Helper()
	p := startPython(ctx, t, "http.server", procEnv(shim, filepath.Join(logDir, "server.%p.log")),
		filepath.Join(logDir, "server.out"), "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir,
		strconv.Itoa(port))
	ports := []int{port}
	if shim != "" && withSDP {
		ports = append(ports, sdpPort(port))
	}
	p.waitListening(ctx, t, ports...)
	return p
}

// startPython runs python3 with args and env in the background, its output in out, stopped at
// the end of the test (or by the caller, earlier).
func startPython(ctx context.Context, t *testing.T, name string, env []string, out string, args ...string) *proc {
	t.Helper()
	return startProg(ctx, t, name, env, out, python, args...)
}

// startProg runs bin with args and env in the background, its output in out, stopped at the
// end of the test (or by the caller, earlier).
func startProg(ctx context.Context, t *testing.T, name string, env []string, out, bin string, args ...string) *proc {
	t.Helper()
	// env --default-signal=INT: a SIGINT ignored by whoever started the tests must not be
	// inherited, or python would never see the interrupt that makes it exit cleanly.
	cmd := exec.CommandContext(ctx, "env", append([]string{"--default-signal=INT", bin}, args...)...)
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	return runProc(t, name, cmd, out)
}

// runProc starts cmd with its output in out and returns it as a proc, stopped at the end of
// the test (or by the caller, earlier).
func runProc(t *testing.T, name string, cmd *exec.Cmd, out string) *proc {
	t.Helper()
	f, err := os.Create(out)
	require.NoError(t, err)
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

// curl runs curl (preloaded with shim unless shim is ""), logging to logDir/client.<pid>.log.
// It returns curl's error, with its output in the message.
func curl(ctx context.Context, shim, logDir string, args ...string) error {
	base := []string{"-sS", "--fail", "--noproxy", "*", "--max-time", "120"}
	cmd := exec.CommandContext(ctx, "curl", append(base, args...)...)
	cmd.Env = procEnv(shim, filepath.Join(logDir, "client.%p.log"))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("curl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// statsKeys are the keys every stats line carries.
var statsKeys = []string{"pid", "prog", "sdp_conns", "tcp_conns", "fpdus_tx", "fpdus_rx",
	"markers_tx", "markers_rx", "crc_bytes_rx", "crc_errors", "payload_tx", "payload_rx"}

var (
	statsLineRe = regexp.MustCompile(`libsdp: stats (.*)$`)
	keyValueRe  = regexp.MustCompile(`([A-Za-z0-9_]+)=(\S+)`)
)

// stats is one parsed stats line.
type stats map[string]string

// parseStats parses the key=value pairs of a line containing "libsdp: stats ".
func parseStats(line string) (stats, bool) {
	m := statsLineRe.FindStringSubmatch(line)
	if m == nil {
		return nil, false
	}
	s := stats{}
	for _, kv := range keyValueRe.FindAllStringSubmatch(m[1], -1) {
		s[kv[1]] = kv[2]
	}
	return s, true
}

// n returns a numeric value of the line, failing the test if it is absent or not a number.
func (s stats) n(t *testing.T, key string) int64 {
	t.Helper()
	v, ok := s[key]
	require.Truef(t, ok, "stats line has no %s: %v", key, s)
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoErrorf(t, err, "stats %s=%q", key, v)
	return n
}

// readStats returns the stats line of the one process that logged to dir/prefix.*.log.
func readStats(t *testing.T, dir, prefix string) stats {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, prefix+".*.log"))
	require.NoError(t, err)
	var found []stats
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if s, ok := parseStats(line); ok {
				found = append(found, s)
			}
		}
	}
	require.Lenf(t, found, 1, "want exactly one stats line in %s/%s.*.log (SDP_STATS=1); logs:\n%s",
		dir, prefix, logs(dir))
	for _, k := range statsKeys {
		require.Containsf(t, found[0], k, "stats line lacks %s", k)
	}
	return found[0]
}

// logText returns the text of every dir/prefix.*.log.
func logText(t *testing.T, dir, prefix string) string {
	t.Helper()
	return globText(t, filepath.Join(dir, prefix+".*.log"))
}

// globText returns the text of every file the pattern matches, whole, one after another.
func globText(t *testing.T, pattern string) string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		b.Write(data)
	}
	return b.String()
}

// logs returns the end of every log and output file in dir, for failure messages.
func logs(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, ".log") || strings.HasSuffix(f, ".out") {
			fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(f), tail(f))
		}
	}
	return b.String()
}

// tail returns the last 4 KiB of a file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// dumpLogsOnFailure logs every file of dir at the end of a failed test.
func dumpLogsOnFailure(t *testing.T, dir string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs in %s:\n%s", dir, logs(dir))
		}
	})
}
