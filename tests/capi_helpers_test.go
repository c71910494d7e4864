package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The C API tests: one C program per family of socket calls (tests/c/*.c), each both a server
// and a client (see tests/c/capi.h), run with and without libsdp at either end.

const (
	// runTimeout bounds one run of a program pair; the programs' own watchdog is shorter.
	runTimeout = 30 * time.Second
	// portsTimeout bounds the wait for a server's "PORTS" line.
	portsTimeout = 10 * time.Second
)

// family is one C test program (with a variant) and the connections it makes.
type family struct {
	name  string   // subtest name
	prog  string   // tests/c/<prog>.c
	part  string   // variant passed to the program, "-" for the default one
	conns int      // connections between the client and the server process
	self  bool     // also run with both ends in one preloaded process (threads)
	env   []string // added to each preloaded end's environment
	// expect, when set, replaces the connection counts derived from conns (for programs that
	// make connections inside one role, such as a forked child connecting to its parent).
	expect func(cfg capiConfig) capiWant
	// check, when set, makes further checks of a passed run (dir holds the logs).
	check func(t *testing.T, dir string, cfg capiConfig)
}

// capiConfig says which ends run under libsdp.
type capiConfig struct {
	name          string
	serverPreload bool
	clientPreload bool
	self          bool // one process, both ends (always preloaded)
}

var capiConfigs = []capiConfig{
	{name: "sdp", serverPreload: true, clientPreload: true},
	{name: "self", self: true},
	{name: "client-preloaded", clientPreload: true},
	{name: "server-preloaded", serverPreload: true},
	{name: "plain"},
}

// conns counts a process's connections by transport, summed over its stats lines.
type conns struct{ sdp, tcp int64 }

// capiWant is what the stats lines must show; nil: the role is not preloaded and writes none.
type capiWant struct{ client, server, self *conns }

func (f family) want(cfg capiConfig) capiWant {
	if f.expect != nil {
		return f.expect(cfg)
	}
	n := int64(f.conns)
	switch {
	case cfg.self:
		return capiWant{self: &conns{sdp: 2 * n}}
	case cfg.serverPreload && cfg.clientPreload:
		return capiWant{client: &conns{sdp: n}, server: &conns{sdp: n}}
	case cfg.clientPreload:
		return capiWant{client: &conns{tcp: n}}
	case cfg.serverPreload:
		return capiWant{server: &conns{tcp: n}}
	}
	return capiWant{}
}

// compileC builds tests/c/<prog>.c for every program of fams into dir, in parallel, and returns
// the binaries by program name.
func compileC(ctx context.Context, t *testing.T, dir string, fams []family) map[string]string {
	t.Helper()
	src, err := filepath.Abs("c")
	require.NoError(t, err)
	bins := map[string]string{}
	for _, f := range fams {
		bins[f.prog] = filepath.Join(dir, f.prog)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for prog, bin := range bins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, "gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-g",
				"-pthread", "-o", bin, filepath.Join(src, prog+".c"))
			cmd.Env = cleanEnv()
			if out, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("gcc %s.c: %v\n%s", prog, err, out))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs, "compiling the C test programs")
	return bins
}

// cprog is one running C test program; its stdout and stderr go to dir/<name>.out.
type cprog struct {
	name  string
	out   string
	cmd   *exec.Cmd
	ports chan string // the server's "PORTS ..." line
	done  chan struct{}
	err   error
}

func startC(ctx context.Context, t *testing.T, dir, name string, env []string, bin string, args ...string) *cprog {
	t.Helper()
	p := &cprog{name: name, out: filepath.Join(dir, name+".out"), ports: make(chan string, 1),
		done: make(chan struct{})}
	f, err := os.OpenFile(p.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer f.Close()
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Env = env
	p.cmd.Dir = dir
	p.cmd.Stderr = f
	p.cmd.WaitDelay = 5 * time.Second
	// Its own process group, so that forked workers are stopped with it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Cancel = func() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	// The pipe's reader copies every line to the output file and passes the PORTS line on.
	copied := make(chan struct{})
	w, err := os.OpenFile(p.out, os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	go func() {
		defer close(copied)
		defer w.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(w, line)
			if strings.HasPrefix(line, "PORTS ") {
				select {
				case p.ports <- line:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		<-copied
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// waitPorts returns the ports the server printed.
func (p *cprog) waitPorts(t *testing.T) []string {
	t.Helper()
	select {
	case line := <-p.ports:
		return strings.Fields(line)[1:]
	case <-p.done:
		t.Fatalf("%s exited (%v) before printing its ports; output:\n%s", p.name, p.err, tail(p.out))
	case <-time.After(portsTimeout):
		t.Fatalf("%s printed no ports within %v; output:\n%s", p.name, portsTimeout, tail(p.out))
	}
	return nil
}

// wait waits for the program and checks that it exited 0.
func (p *cprog) wait(ctx context.Context, t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	assert.NoErrorf(t, p.err, "%s; output:\n%s", p.name, tail(p.out))
}

// sumStats sums the connection counts of every stats line in dir/prefix.*.log; lines is how
// many there were.
func sumStats(t *testing.T, dir, prefix string) (c conns, crcErrors int64, lines int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, prefix+".*.log"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			s, ok := parseStats(line)
			if !ok {
				continue
			}
			lines++
			c.sdp += s.n(t, "sdp_conns")
			c.tcp += s.n(t, "tcp_conns")
			crcErrors += s.n(t, "crc_errors")
		}
	}
	return c, crcErrors, lines
}

// checkTransport asserts the transports that the processes logging to dir/prefix.*.log used.
func checkTransport(t *testing.T, dir, prefix string, want *conns) {
	t.Helper()
	got, crcErrors, lines := sumStats(t, dir, prefix)
	if want == nil {
		assert.Zerof(t, lines, "%s is not preloaded but wrote stats lines", prefix)
		return
	}
	if !assert.Positivef(t, lines, "%s wrote no stats line (SDP_STATS=1)", prefix) {
		return
	}
	assert.Equalf(t, want.sdp, got.sdp, "%s: connections over SDP (sdp_conns)", prefix)
	assert.Equalf(t, want.tcp, got.tcp, "%s: connections over TCP (tcp_conns)", prefix)
	assert.Zerof(t, crcErrors, "%s: crc_errors", prefix)
	if want.tcp > 0 {
		assert.Regexpf(t, `transport=tcp reason=\S+`, logText(t, dir, prefix),
			"%s: a connection over TCP logs its reason", prefix)
	}
}

// runFamily runs one family in one configuration and checks the programs' verdicts and the
// transports used.
func runFamily(t *testing.T, shim string, bins map[string]string, f family, cfg capiConfig) {
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	t.Cleanup(cancel)
	env := func(preload bool, prefix string) []string {
		var e []string
		if preload {
			e = append(sdpEnv(shim, filepath.Join(dir, prefix+".%p.log")), f.env...)
		} else {
			e = cleanEnv()
		}
		return append(e, "TMPDIR="+dir)
	}
	bin := bins[f.prog]
	if cfg.self {
		p := startC(ctx, t, dir, "self", env(true, "self"), bin, "self", f.part)
		p.wait(ctx, t)
	} else {
		srv := startC(ctx, t, dir, "server", env(cfg.serverPreload, "server"), bin, "server", f.part)
		ports := srv.waitPorts(t)
		cli := startC(ctx, t, dir, "client", env(cfg.clientPreload, "client"), bin,
			append([]string{"client", f.part}, ports...)...)
		cli.wait(ctx, t)
		srv.wait(ctx, t)
	}
	if t.Failed() {
		return
	}
	if f.check != nil {
		f.check(t, dir, cfg)
	}
	w := f.want(cfg)
	if cfg.self {
		checkTransport(t, dir, "self", w.self)
		return
	}
	checkTransport(t, dir, "client", w.client)
	checkTransport(t, dir, "server", w.server)
}

// runFamilies compiles and runs every family in every configuration that applies to it.
func runFamilies(t *testing.T, fams []family) {
	shim, ctx := setup(t)
	bins := compileC(ctx, t, t.TempDir(), fams)
	for _, f := range fams {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for _, cfg := range capiConfigs {
				if cfg.self && !f.self {
					continue
				}
				t.Run(cfg.name, func(t *testing.T) {
					t.Parallel()
					runFamily(t, shim, bins, f, cfg)
				})
			}
		})
	}
}
