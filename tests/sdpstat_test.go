package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"libsdp/internal/settings"
	"libsdp/internal/statsfile"
)

// holdClient connects to an HTTP server, asks for a file, reads at least want bytes of the
// answer and reports "ready <bytes> <local port>"; it keeps the connection open until its
// stdin ends, so that the connection can be observed while it is alive. It sets its process
// title first (setTitle), as PostgreSQL's backends do: sdpstat must still name it python3.
const holdClient = setTitle + `import socket, sys
port, want = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.sendall(b"GET /big.bin HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
got = 0
while got < want:
    b = s.recv(65536)
    if not b:
        break
    got += len(b)
print("ready", got, s.getsockname()[1], flush=True)
sys.stdin.readline()
s.close()
`

// holder is a running holdClient.
type holder struct {
	*proc
	stdin     io.WriteCloser
	localPort int
	received  int64
}

// startHolder runs holdClient (preloaded with shim unless shim is "") against port and waits
// until it has received want bytes. Closing its stdin (done at cleanup) lets it finish.
func startHolder(ctx context.Context, t *testing.T, shim, dir, name string, port, want int) *holder {
	t.Helper()
	script := filepath.Join(dir, "hold.py")
	require.NoError(t, os.WriteFile(script, []byte(holdClient), 0o644))
	cmd := exec.CommandContext(ctx, python, script, strconv.Itoa(port), strconv.Itoa(want))
	cmd.Env = procEnv(shim, filepath.Join(dir, name+".%p.log"))
	cmd.WaitDelay = 10 * time.Second
	errPath := filepath.Join(dir, name+".out")
	f, err := os.Create(errPath)
	require.NoError(t, err)
	defer f.Close()
	cmd.Stderr = f
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	h := &holder{proc: &proc{name: name, cmd: cmd, out: errPath, done: make(chan struct{})}, stdin: stdin}

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
		h.err = cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-h.done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-h.done
		}
	})

	select {
	case line, ok := <-lines:
		require.Truef(t, ok, "%s ended before reading its data (%v); output:\n%s", name, h.err, tail(errPath))
		f := strings.Fields(line)
		require.Lenf(t, f, 3, "%s said %q", name, line)
		h.received, err = strconv.ParseInt(f[1], 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqualf(t, h.received, int64(want), "%s: connection ended early; output:\n%s", name, tail(errPath))
		h.localPort, err = strconv.Atoi(f[2])
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not receive %d bytes within 60 s; output:\n%s", name, want, tail(errPath))
	}
	return h
}

// sdpstatBin returns the path of build/sdpstat.
func sdpstatBin(t *testing.T, shim string) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(shim), "sdpstat")
	_, err := os.Stat(bin)
	require.NoErrorf(t, err, "%s is missing: run make first", bin)
	return bin
}

// runSdpstat runs build/sdpstat with args and returns its stdout, stderr and exit code.
func runSdpstat(ctx context.Context, t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("sdpstat %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// sdpstatProcesses returns sdpstat's view of every process using libsdp, by pid.
func sdpstatProcesses(ctx context.Context, t *testing.T, bin string) map[int]statsfile.Process {
	t.Helper()
	out, errOut, code := runSdpstat(ctx, t, bin, "--json")
	require.Equalf(t, 0, code, "sdpstat --json failed: %s", errOut)
	var doc struct {
		Processes []statsfile.Process `json:"processes"`
	}
	require.NoErrorf(t, json.Unmarshal([]byte(out), &doc), "sdpstat --json printed %q", out)
	m := map[int]statsfile.Process{}
	for _, p := range doc.Processes {
		m[p.PID] = p
	}
	return m
}

// waitSdpstat polls sdpstat --json (the files are refreshed twice a second) until check
// finds what it wants in it, and fails with check's last complaint after a bounded wait.
func waitSdpstat(ctx context.Context, t *testing.T, bin string, check func(map[int]statsfile.Process) error) map[int]statsfile.Process {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		procs := sdpstatProcesses(ctx, t, bin)
		err := check(procs)
		if err == nil {
			return procs
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(procs, "", "  ")
			t.Fatalf("sdpstat: %v\nlast listing:\n%s", err, b)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sdpstat: %v: %v", err, ctx.Err())
		case <-tick.C:
		}
	}
}

// statRun is a preloaded http.server serving one file, with what the sdpstat tests need.
type statRun struct {
	ctx            context.Context
	shim, bin, dir string // the shim, build/sdpstat, the run's directory (logs; www/ served)
	port           int
	srv            *proc
}

// startStatServer starts a preloaded python3 http.server serving a file name of size bytes.
func startStatServer(t *testing.T, name string, size int64) statRun {
	shim, ctx := setup(t)
	r := statRun{ctx: ctx, shim: shim, bin: sdpstatBin(t, shim), dir: t.TempDir(), port: freePort(t)}
	dumpLogsOnFailure(t, r.dir)
	www := filepath.Join(r.dir, "www")
	require.NoError(t, os.Mkdir(www, 0o755))
	makeFile(t, www, name, size)
	r.srv = startServer(ctx, t, shim, www, r.dir, r.port)
	return r
}

// findSocket returns the socket of p matching kind and, when not "", the local and remote
// addresses.
func findSocket(p statsfile.Process, kind, local, remote string) *statsfile.Socket {
	for i, s := range p.Sockets {
		if s.Kind == kind && (local == "" || s.Local == local) && (remote == "" || s.Remote == remote) {
			return &p.Sockets[i]
		}
	}
	return nil
}

// TestSdpstat: a preloaded http.server serves a preloaded client and a plain client, both
// holding their connection open; sdpstat lists both preloaded processes with the listener (TCP
// and SDP ports), the SDP connection from both ends with its counters, and the plain client's
// connection as TCP with the reason plain-peer.
func TestSdpstat(t *testing.T) {
	// Far more than the SDP receive buffers and the socket buffers hold, so that the server
	// is still sending while the clients hold their connections.
	r := startStatServer(t, "big.bin", 64<<20)
	ctx, shim, bin, dir, port := r.ctx, r.shim, r.bin, r.dir, r.port
	srvPid := r.srv.cmd.Process.Pid
	const want = 1 << 20
	sdpCli := startHolder(ctx, t, shim, dir, "client-sdp", port, want)
	plainCli := startHolder(ctx, t, "", dir, "client-plain", port, want)
	app := fmt.Sprintf("127.0.0.1:%d", port)
	sdpPeer := fmt.Sprintf("127.0.0.1:%d", sdpCli.localPort)
	plainPeer := fmt.Sprintf("127.0.0.1:%d", plainCli.localPort)

	procs := waitSdpstat(ctx, t, bin, func(m map[int]statsfile.Process) error {
		s, ok := m[srvPid]
		if !ok {
			return fmt.Errorf("server pid %d not listed", srvPid)
		}
		acc := findSocket(s, "sdp", app, sdpPeer)
		if acc == nil || acc.SDP == nil || acc.SDP.PayloadTx < want || acc.SDP.FPDUsTx == 0 {
			return fmt.Errorf("server: no SDP connection from %s with its counters", sdpPeer)
		}
		if findSocket(s, "tcp", app, plainPeer) == nil {
			return fmt.Errorf("server: no TCP connection from %s", plainPeer)
		}
		c, ok := m[sdpCli.cmd.Process.Pid]
		if !ok {
			return fmt.Errorf("client pid %d not listed", sdpCli.cmd.Process.Pid)
		}
		cs := findSocket(c, "sdp", sdpPeer, app)
		if cs == nil || cs.SDP == nil || cs.SDP.PayloadRx < uint64(sdpCli.received) {
			return fmt.Errorf("client: no SDP connection to %s that has received %d bytes", app, sdpCli.received)
		}
		return nil
	})
	_, listed := procs[plainCli.cmd.Process.Pid]
	assert.False(t, listed, "the plain client does not run libsdp and is not listed")

	s := procs[srvPid]
	assert.Equal(t, "python3", s.Prog)
	assert.Positive(t, s.StartTicks)
	l := findSocket(s, "listen", app, "")
	require.NotNil(t, l, "server: the listener on %s", app)
	assert.Equal(t, "tcp+sdp", l.Transport, "a listener takes TCP and SDP")
	assert.Equal(t, sdpPort(port), l.SDPPort, "the listener's SDP port")
	assert.Equal(t, "listen", l.State)
	assert.Nil(t, l.SDP)

	acc := findSocket(s, "sdp", app, sdpPeer)
	assert.Equal(t, "sdp", acc.Transport)
	assert.Empty(t, acc.Reason)
	assert.Equal(t, "established", acc.State)
	d := acc.SDP
	assert.Equal(t, "up", d.State)
	assert.Equal(t, defaultLink(), d.Link, "both ends on this host, SDP_SHM's default")
	assert.Equal(t, "credit", d.FlowControl, "the default flow control")
	assert.Equal(t, "integrated", d.Buffering, "the default buffering")
	assert.Equal(t, "inline", d.Progress, "the default progress")
	assert.Positive(t, d.BCopySends, "Data messages sent")
	// Markers and CRC are on by default, and off between two ends on this host that allow
	// shared memory (SDP_SHM's default), whichever carries the bytes.
	framed := defaultLink() != "shm"
	assert.Equal(t, framed, d.Markers, "markers negotiated")
	assert.Equal(t, framed, d.CRC, "CRC negotiated")
	assert.Positive(t, d.PayloadRx, "the request")
	assert.Positive(t, d.FPDUsRx)
	assert.Equal(t, framed, d.MarkersTx > 0, "markers in %d bytes sent", d.WireTx)
	assert.Greater(t, d.WireTx, d.PayloadTx, "framing on the wire")
	assert.Equal(t, framed, d.CRCBytesRx > 0, "bytes checked by CRC")
	assert.Zero(t, d.CRCErrors)
	assert.Positive(t, d.MsgsTx)
	// Every payload byte went by buffer copy or by zero copy (RDMA Read), and the
	// copies per byte follow from the copy counter.
	assert.Equal(t, d.PayloadTx, d.BCopyTx+d.ZCopyTx, "buffer copy and zero copy add up to the payload")
	if d.ZCopyTx > 0 {
		assert.Positive(t, d.ZCopySends, "zero-copy bytes come with SrcAvail offers")
	}
	assert.InDelta(t, float64(d.UserCopiesTx)/float64(d.PayloadTx), d.CopiesPerByteTx, 0.01)
	assert.LessOrEqual(t, d.CopiesPerByteTx, 1.01, "integrated buffering: at most one user-space copy per byte sent")
	assert.Positive(t, s.Totals["sdp_conns"], "process totals")

	tcp := findSocket(s, "tcp", app, plainPeer)
	assert.Equal(t, "tcp", tcp.Transport)
	assert.Equal(t, "plain-peer", tcp.Reason)
	assert.Nil(t, tcp.SDP, "no SDP counters for a TCP connection")

	c := procs[sdpCli.cmd.Process.Pid]
	assert.Equal(t, "python3", c.Prog)
	cs := findSocket(c, "sdp", sdpPeer, app)
	assert.Equal(t, "sdp", cs.Transport, "the client sees its connection to %s over SDP", app)
	assert.Equal(t, "up", cs.SDP.State)
	assert.Positive(t, cs.SDP.PayloadTx, "the request")
	assert.Positive(t, cs.SDP.FPDUsRx)
	assert.Equal(t, framed, cs.SDP.MarkersRx > 0, "markers received")
	assert.Equal(t, framed, cs.SDP.CRCBytesRx > 0, "bytes checked by CRC")

	// The table for one process.
	out, errOut, code := runSdpstat(ctx, t, bin, "-p", strconv.Itoa(srvPid))
	require.Equalf(t, 0, code, "sdpstat -p: %s", errOut)
	assert.Contains(t, out, fmt.Sprintf("PID %d  python3", srvPid))
	assert.Contains(t, out, fmt.Sprintf("%s (sdp %d)", app, sdpPort(port)))
	assert.Regexp(t, `(?m)^\d+ +listen +tcp\+sdp `, out)
	assert.Regexp(t, fmt.Sprintf(`(?m)^\d+ +sdp +sdp/%s +- +%s +%s +established +up +credit +integrated +inline +\d+`, defaultLink(), app, sdpPeer), out)
	assert.Regexp(t, fmt.Sprintf(`(?m)^\d+ +tcp +tcp +plain-peer +%s +%s `, app, plainPeer), out)
	assert.NotContains(t, out, fmt.Sprintf("PID %d ", sdpCli.cmd.Process.Pid), "-p shows one process")

	// Bad options and unknown processes fail clearly.
	_, errOut, code = runSdpstat(ctx, t, bin, "--no-such-option")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown option "--no-such-option"`)
	_, errOut, code = runSdpstat(ctx, t, bin, "-p", strconv.Itoa(plainCli.cmd.Process.Pid))
	assert.Equal(t, 1, code, "a process without libsdp")
	assert.Contains(t, errOut, "is not using libsdp")

	// At exit the process's file goes away with it.
	statsFile := filepath.Join(statsfile.Dir(os.Getuid()), statsfile.FileName(srvPid))
	require.FileExists(t, statsFile)
	require.NoError(t, sdpCli.stdin.Close())
	require.NoError(t, plainCli.stdin.Close())
	r.srv.stop()
	_, err := os.Lstat(statsFile)
	assert.ErrorIs(t, err, os.ErrNotExist, "the server's statistics file is removed when it exits")
	procs = sdpstatProcesses(ctx, t, bin)
	assert.NotContains(t, procs, srvPid, "an ended process is not listed")
}

// TestSdpstatBeforeEngine: a preloaded server that has had no SDP connection yet has no
// engine and publishes nothing; sdpstat still lists it (from /proc), with its listener's TCP
// and SDP ports, and switches to the engine's own snapshot after the first SDP connection.
func TestSdpstatBeforeEngine(t *testing.T) {
	r := startStatServer(t, "small.bin", 64<<10)
	ctx, shim, bin, dir, port := r.ctx, r.shim, r.bin, r.dir, r.port
	pid := r.srv.cmd.Process.Pid
	app := fmt.Sprintf("127.0.0.1:%d", port)

	procs := sdpstatProcesses(ctx, t, bin)
	require.Contains(t, procs, pid, "a preloaded process is listed before its engine loads")
	p := procs[pid]
	assert.False(t, p.EngineLoaded)
	assert.Equal(t, "python3", p.Prog)
	l := findSocket(p, "listen", app, "")
	require.NotNil(t, l, "the listener on %s", app)
	assert.Equal(t, "tcp+sdp", l.Transport)
	assert.Equal(t, sdpPort(port), l.SDPPort)
	assert.Equal(t, "listen", l.State)
	assert.Len(t, p.Sockets, 1, "the hidden SDP listener is shown with its listener, not apart")
	out, errOut, code := runSdpstat(ctx, t, bin, "-p", strconv.Itoa(pid))
	require.Equalf(t, 0, code, "sdpstat -p: %s", errOut)
	assert.Contains(t, out, "engine not loaded")
	assert.Contains(t, out, fmt.Sprintf("%s (sdp %d)", app, sdpPort(port)))

	// The first SDP connection loads the server's engine, which publishes its snapshot.
	require.NoError(t, curl(ctx, shim, dir, "-o", filepath.Join(dir, "got.bin"), "http://"+app+"/small.bin"))
	waitSdpstat(ctx, t, bin, func(m map[int]statsfile.Process) error {
		if !m[pid].EngineLoaded {
			return fmt.Errorf("pid %d: engine_loaded still false after an SDP connection", pid)
		}
		if m[pid].Totals["sdp_conns"] == 0 {
			return fmt.Errorf("pid %d: no SDP connection counted", pid)
		}
		return nil
	})
}

// TestSdpstatStaleFile: a file left by a process that is gone is neither listed nor kept.
func TestSdpstatStaleFile(t *testing.T) {
	shim, ctx := setup(t)
	bin := sdpstatBin(t, shim)
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	dead := cmd.Process.Pid
	uid := os.Getuid()
	dir := statsfile.Dir(uid)
	require.NoError(t, statsfile.EnsureDir(dir, uid))
	data, err := json.Marshal(statsfile.Process{Version: statsfile.Version, PID: dead, Prog: "gone", StartTicks: 1,
		Sockets: []statsfile.Socket{{FD: 3, Kind: "sdp", Transport: "sdp"}}})
	require.NoError(t, err)
	require.NoError(t, statsfile.Write(dir, uid, dead, data))
	t.Cleanup(func() { statsfile.Remove(dir, dead) })

	procs := sdpstatProcesses(ctx, t, bin)
	assert.NotContains(t, procs, dead)
	_, err = os.Lstat(filepath.Join(dir, statsfile.FileName(dead)))
	assert.ErrorIs(t, err, os.ErrNotExist, "sdpstat removes the file of a process that is gone")
}

// defaultLink is what carries a connection between two preloaded processes
// on this host by default: shared memory when SDP_SHM's default is on.
func defaultLink() string {
	if settings.SharedMemory.Default == "1" {
		return "shm"
	}
	return "iwarp"
}
