package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// installedFiles are the files make install puts under DESTDIR with PREFIX=/usr.
var installedFiles = []string{
	"usr/bin/sdp_run",
	"usr/bin/sdpstat",
	"usr/lib/libsdp-engine.so",
	"usr/lib/libsdp.so",
	"usr/share/doc/libsdp/libsdp.conf.example",
	"usr/share/man/man1/sdp_run.1",
	"usr/share/man/man1/sdpstat.1",
}

// repoRoot is the top of the source tree.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	return root
}

// runMake runs make in the source tree and returns its output. The environment of an outer
// make (make test runs these tests) is left out: its jobserver descriptors are not open here.
func runMake(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "make", append([]string{"--no-print-directory", "-C", repoRoot(t)}, args...)...)
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "DESTDIR", "PREFIX":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	require.NoErrorf(t, err, "make %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// installTo runs make install into a new temporary DESTDIR with PREFIX=/usr and returns it.
func installTo(ctx context.Context, t *testing.T) string {
	t.Helper()
	dest := t.TempDir()
	runMake(ctx, t, "install", "DESTDIR="+dest, "PREFIX=/usr")
	return dest
}

// filesUnder lists everything below dir that is not a directory, relative to dir.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(files)
	return files
}

// startProc runs argv in the background with env, output to outFile, and stops it (SIGINT,
// then SIGKILL after 10 s) at the end of the test. env --default-signal=INT: a SIGINT ignored
// by whoever started the tests must not be inherited, or python would not exit cleanly.
func startProc(ctx context.Context, t *testing.T, name string, env []string, outFile string, argv ...string) *proc {
	t.Helper()
	cmd := exec.CommandContext(ctx, "env", append([]string{"--default-signal=INT"}, argv...)...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	return runProc(t, name, cmd, outFile)
}

// stopClean stops p and requires that it exited by itself after the interrupt (so its
// statistics were written).
func stopClean(t *testing.T, p *proc) {
	t.Helper()
	p.stop()
	var ee *exec.ExitError
	if p.err != nil && !(errors.As(p.err, &ee) && ee.ExitCode() == 130) {
		// python exits with 130 after a KeyboardInterrupt; anything else is a failure.
		require.NoErrorf(t, p.err, "%s; output:\n%s", p.name, tail(p.out))
	}
}

// mappedLibsdp returns the files of process pid whose names contain "libsdp" or extra, as the
// kernel maps them (the objects the loader really loaded, whatever path led to them).
func mappedLibsdp(t *testing.T, pid int, extra string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && (strings.Contains(f[5], "libsdp") || (extra != "" && strings.Contains(f[5], extra))) {
			seen[f[5]] = true
		}
	}
	var files []string
	for f := range seen {
		files = append(files, f)
	}
	sort.Strings(files)
	return files
}

// runCmd runs argv with env and returns its stdout, its stderr and its exit status.
func runCmd(ctx context.Context, t *testing.T, env []string, argv ...string) (stdout, stderr string, status int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.WaitDelay = 5 * time.Second
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// curlArgs are the options every curl of these tests uses.
var curlArgs = []string{"curl", "-sS", "--fail", "--noproxy", "*", "--max-time", "60"}

// TestInstallDestdir: make install into a DESTDIR puts exactly the documented files there; a
// server and a client preloaded from the installed tree (not the build tree) talk over SDP, the
// installed example rules file parses without a complaint and keeps the default (SDP with a
// libsdp peer, TCP without one), and make uninstall removes every file again.
func TestInstallDestdir(t *testing.T) {
	_, ctx := setup(t)
	root := repoRoot(t)
	dest := installTo(ctx, t)
	require.Equal(t, installedFiles, filesUnder(t, dest), "make install DESTDIR=%s PREFIX=/usr", dest)
	for f, mode := range map[string]os.FileMode{"usr/lib/libsdp.so": 0o644, "usr/lib/libsdp-engine.so": 0o644,
		"usr/bin/sdp_run": 0o755, "usr/bin/sdpstat": 0o755, "usr/share/doc/libsdp/libsdp.conf.example": 0o644} {
		st, err := os.Stat(filepath.Join(dest, f))
		require.NoError(t, err)
		assert.Equalf(t, mode, st.Mode().Perm(), "mode of %s", f)
	}

	lib := filepath.Join(dest, "usr/lib/libsdp.so")
	conf := filepath.Join(dest, "usr/share/doc/libsdp/libsdp.conf.example")
	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	env := func(logName string) []string {
		// cleanEnv drops SDP_ENGINE: the shim must find the engine beside the installed libsdp.so.
		return append(cleanEnv(), "LD_PRELOAD="+lib, "SDP_STATS=1", "SDP_LOG_LEVEL=info",
			"SDP_LOG_FILE="+filepath.Join(logDir, logName+".%p.log"), "SDP_CONFIG_FILE="+conf)
	}
	for _, kv := range env("x") {
		require.NotContainsf(t, kv, filepath.Join(root, "build"), "the environment names the build tree")
	}

	www := t.TempDir()
	sum := makeFile(t, www, "blob", 1<<20)
	port := freePort(t)
	srv := startProc(ctx, t, "http.server", env("server"), filepath.Join(logDir, "server.out"),
		python, "-m", "http.server", "--bind", "127.0.0.1", "--directory", www, strconv.Itoa(port))
	srv.waitListening(ctx, t, port, sdpPort(port))

	got := filepath.Join(t.TempDir(), "blob")
	_, stderr, status := runCmd(ctx, t, env("client"), append(curlArgs, "-o", got,
		fmt.Sprintf("http://127.0.0.1:%d/blob", port))...)
	require.Zerof(t, status, "curl: %s", stderr)
	assert.Equal(t, sum, fileSHA(t, got), "the file came through intact")

	// The server has served an SDP connection, so its engine is loaded: both objects must be
	// the installed ones.
	maps := mappedLibsdp(t, srv.cmd.Process.Pid, "")
	assert.Equal(t, []string{filepath.Join(dest, "usr/lib/libsdp-engine.so"), lib}, maps,
		"the server's libsdp objects come from the installed tree")
	for _, m := range maps {
		assert.NotContains(t, m, filepath.Join(root, "build"))
	}
	stopClean(t, srv)
	assert.EqualValues(t, 1, readStats(t, logDir, "client").n(t, "sdp_conns"), "the client's connection over SDP")
	assert.EqualValues(t, 1, readStats(t, logDir, "server").n(t, "sdp_conns"), "the server's connection over SDP")

	// With the example rules file a preloaded client still reaches a plain server over TCP: a
	// file without use rules would mean SDP only, and this connection would be refused.
	plainPort := freePort(t)
	plain := startProc(ctx, t, "plain http.server", cleanEnv(), filepath.Join(logDir, "plain-server.out"),
		python, "-m", "http.server", "--bind", "127.0.0.1", "--directory", www, strconv.Itoa(plainPort))
	plain.waitListening(ctx, t, plainPort)
	_, stderr, status = runCmd(ctx, t, env("fallback"), append(curlArgs, "-o", got,
		fmt.Sprintf("http://127.0.0.1:%d/blob", plainPort))...)
	require.Zerof(t, status, "curl to a plain server with the example rules: %s", stderr)
	fb := readStats(t, logDir, "fallback")
	assert.EqualValues(t, 0, fb.n(t, "sdp_conns"))
	assert.EqualValues(t, 1, fb.n(t, "tcp_conns"), "the example rules let a connection fall back to TCP")
	stopClean(t, plain)

	for _, prefix := range []string{"client", "server", "fallback"} {
		text := logText(t, logDir, prefix)
		assert.NotContainsf(t, text, conf+":", "%s: the example rules file has a bad line", prefix)
		assert.NotContainsf(t, text, "ignoring its rules", "%s: the example rules file was rejected", prefix)
		assert.NotContainsf(t, text, "cannot load", "%s: the engine did not load", prefix)
	}

	runMake(ctx, t, "uninstall", "DESTDIR="+dest, "PREFIX=/usr")
	assert.Empty(t, filesUnder(t, dest), "make uninstall left files behind")
	_, err := os.Stat(filepath.Join(dest, "usr/share/doc/libsdp"))
	assert.Truef(t, errors.Is(err, fs.ErrNotExist), "make uninstall left the documentation directory: %v", err)
}

// clientPy fetches /hello from the port in argv[1] and prints its LD_PRELOAD, the objects it
// maps whose names contain "libsdp" or argv[2], and the answer.
const clientPy = `
import os, sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/hello" % sys.argv[1], timeout=30).read()
print("LD_PRELOAD=" + os.environ.get("LD_PRELOAD", ""))
maps = set()
for line in open("/proc/self/maps"):
    f = line.split()
    if len(f) >= 6 and ("libsdp" in f[5] or sys.argv[2] in f[5]):
        maps.add(f[5])
for m in sorted(maps):
    print("MAP " + m)
print("GOT " + body.decode())
`

// buildMarker compiles an empty shared object to stand for another preloaded library.
func buildMarker(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "marker.c")
	require.NoError(t, os.WriteFile(src, []byte("int libsdp_test_marker;\n"), 0o644))
	so := filepath.Join(dir, "marker.so")
	out, err := exec.CommandContext(ctx, "gcc", "-shared", "-fPIC", "-o", so, src).CombinedOutput()
	require.NoErrorf(t, err, "gcc: %s", out)
	return so
}

// TestSdpRunPreload: the installed sdp_run puts the installed libsdp.so first in LD_PRELOAD and
// keeps the object already there after it; a server and a client run by it talk over SDP, and
// with -m tcp the client uses TCP (the server, still preloaded, sees a plain peer).
func TestSdpRunPreload(t *testing.T) {
	_, ctx := setup(t)
	root := repoRoot(t)
	dest := installTo(ctx, t)
	sdpRun := filepath.Join(dest, "usr/bin/sdp_run")
	lib := filepath.Join(dest, "usr/lib/libsdp.so")
	engine := filepath.Join(dest, "usr/lib/libsdp-engine.so")
	dir := t.TempDir()
	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	marker := buildMarker(ctx, t, dir)
	www := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(www, "hello"), []byte("hello over sdp"), 0o644))
	script := filepath.Join(dir, "client.py")
	require.NoError(t, os.WriteFile(script, []byte(clientPy), 0o644))

	// -v alone asks for the statistics and the per-connection log lines; only the file is given.
	logEnv := func(name string, extra ...string) []string {
		return append(append(cleanEnv(), "SDP_LOG_FILE="+filepath.Join(logDir, name+".%p.log")), extra...)
	}
	port := freePort(t)
	srv := startProc(ctx, t, "http.server", logEnv("server"), filepath.Join(logDir, "server.out"),
		sdpRun, "-v", python, "-m", "http.server", "--bind", "127.0.0.1", "--directory", www, strconv.Itoa(port))
	srv.waitListening(ctx, t, port, sdpPort(port))

	out, stderr, status := runCmd(ctx, t, logEnv("client", "LD_PRELOAD="+marker),
		sdpRun, "-v", "--", python, script, strconv.Itoa(port), "marker.so")
	require.Zerof(t, status, "client: %s%s", out, stderr)
	assert.Empty(t, stderr, "sdp_run warned about a dynamic program")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Lenf(t, lines, 5, "client output:\n%s", out)
	assert.Equal(t, "LD_PRELOAD="+lib+":"+marker, lines[0], "libsdp first, the other object kept after it")
	want := []string{"MAP " + marker, "MAP " + engine, "MAP " + lib}
	sort.Strings(want)
	assert.Equal(t, want, lines[1:4], "both preloaded objects loaded, and the engine from beside libsdp")
	assert.Equal(t, "GOT hello over sdp", lines[4])
	assert.EqualValues(t, 1, readStats(t, logDir, "client").n(t, "sdp_conns"), "the client's connection over SDP")

	out, stderr, status = runCmd(ctx, t, logEnv("tcpclient", "LD_PRELOAD="+marker),
		sdpRun, "-v", "-m", "tcp", python, script, strconv.Itoa(port), "marker.so")
	require.Zerof(t, status, "client -m tcp: %s%s", out, stderr)
	assert.Contains(t, out, "GOT hello over sdp\n")
	assert.NotContains(t, logText(t, logDir, "tcpclient"), "transport=sdp", "-m tcp used SDP")

	stopClean(t, srv)
	s := readStats(t, logDir, "server")
	assert.EqualValues(t, 1, s.n(t, "sdp_conns"), "the server: the first client over SDP")
	assert.EqualValues(t, 1, s.n(t, "tcp_conns"), "the server: the -m tcp client over TCP")
	assert.Contains(t, logText(t, logDir, "server"), "reason=plain-peer", "the -m tcp client came as a plain peer")

	// An LD_PRELOAD that already names a libsdp.so (another copy, here a harmless object of
	// that name, and the installed one; space- and colon-separated as ld.so allows) gets
	// exactly one, the launcher's own, in front, and keeps the rest in order.
	other := filepath.Join(dir, "other", "libsdp.so")
	require.NoError(t, os.Mkdir(filepath.Dir(other), 0o755))
	b, err := os.ReadFile(marker)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(other, b, 0o644))
	out, stderr, status = runCmd(ctx, t, append(cleanEnv(), "LD_PRELOAD="+marker+" "+other+":"+lib),
		sdpRun, "/bin/sh", "-c", `printf '%s' "$LD_PRELOAD"`)
	require.Zerof(t, status, "%s", stderr)
	assert.Equal(t, lib+":"+marker, out)

	// From the source tree, scripts/sdp_run uses the build tree's libsdp.so.
	out, stderr, status = runCmd(ctx, t, cleanEnv(), filepath.Join(root, "scripts", "sdp_run"),
		"/bin/sh", "-c", `printf '%s' "$LD_PRELOAD"`)
	require.Zerof(t, status, "%s", stderr)
	assert.Equal(t, filepath.Join(root, "build", "libsdp.so"), out)
}

// TestSdpRunCannotPreload: sdp_run says on stderr why a program cannot get libsdp (statically
// linked, setuid to another user) and runs it anyway with its exit status; a dynamic program and
// a script run without a word; a missing program and a bad option fail with env's statuses.
func TestSdpRunCannotPreload(t *testing.T) {
	_, ctx := setup(t)
	uid := squatterUID(t)
	sdpRun := filepath.Join(installTo(ctx, t), "usr/bin/sdp_run")
	dir := t.TempDir()
	src := filepath.Join(dir, "exit7.c")
	require.NoError(t, os.WriteFile(src, []byte("int main(void) { return 7; }\n"), 0o644))
	static := filepath.Join(dir, "exit7-static")
	dynamic := filepath.Join(dir, "exit7")
	for bin, flags := range map[string][]string{static: {"-static"}, dynamic: nil} {
		out, err := exec.CommandContext(ctx, "gcc", append(flags, "-o", bin, src)...).CombinedOutput()
		require.NoErrorf(t, err, "gcc %v: %s", flags, out)
	}
	setuid := filepath.Join(dir, "exit7-setuid")
	b, err := os.ReadFile(dynamic)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(setuid, b, 0o755))
	require.NoError(t, os.Chown(setuid, int(uid), -1))
	require.NoError(t, os.Chmod(setuid, 0o755|os.ModeSetuid))
	script := filepath.Join(dir, "exit3.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\nexit 3\n"), 0o755))
	env := cleanEnv()

	_, stderr, status := runCmd(ctx, t, env, sdpRun, static)
	assert.Equal(t, 7, status, "the static program's own exit status")
	assert.Contains(t, stderr, "sdp_run: warning: "+static+" is statically linked")
	assert.Contains(t, stderr, "stay TCP (running it anyway)")

	_, stderr, status = runCmd(ctx, t, env, sdpRun, setuid)
	assert.Equal(t, 7, status, "the setuid program's own exit status")
	assert.Contains(t, stderr, "sdp_run: warning: "+setuid+" is setuid")

	_, stderr, status = runCmd(ctx, t, env, sdpRun, dynamic)
	assert.Equal(t, 7, status)
	assert.Empty(t, stderr, "no warning for a dynamic program")

	_, stderr, status = runCmd(ctx, t, env, sdpRun, script)
	assert.Equal(t, 3, status)
	assert.Empty(t, stderr, "no warning for a script: its interpreter is preloaded")

	_, stderr, status = runCmd(ctx, t, env, sdpRun, "no-such-program-libsdp")
	assert.Equal(t, 127, status)
	assert.Contains(t, stderr, "sdp_run: error: no-such-program-libsdp: not found")

	_, stderr, status = runCmd(ctx, t, env, sdpRun, "-m", "rdma", dynamic)
	assert.Equal(t, 125, status)
	assert.Contains(t, stderr, "-m rdma: the mode is sdp, tcp or both")
}

// dpkgLockRe matches dpkg's complaint when another package manager holds its lock.
var dpkgLockRe = regexp.MustCompile(`locked by another process`)

// debTimeout bounds TestDebPackage; dpkgLockWait bounds each wait for dpkg's lock.
const (
	debTimeout   = 6 * time.Minute
	dpkgLockWait = 2 * time.Minute
)

// dpkg runs dpkg; while another package manager holds dpkg's lock (dpkg itself does not wait),
// it tries again each second, for at most dpkgLockWait.
func dpkg(ctx context.Context, t *testing.T, args ...string) (string, error) {
	t.Helper()
	deadline := time.Now().Add(dpkgLockWait)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		cmd := exec.CommandContext(ctx, "dpkg", args...)
		cmd.Env = append(cleanEnv(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err == nil || !dpkgLockRe.Match(out) || time.Now().After(deadline) {
			if err != nil {
				err = fmt.Errorf("dpkg %s: %w: %s", strings.Join(args, " "), err, out)
			}
			return string(out), err
		}
		select {
		case <-ctx.Done():
			return string(out), fmt.Errorf("dpkg %s: %w while waiting for dpkg's lock", strings.Join(args, " "), ctx.Err())
		case <-tick.C:
		}
	}
}

// packageStatus is dpkg's status of package libsdp ("" when dpkg has never heard of it).
func packageStatus(ctx context.Context, t *testing.T) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${db:Status-Abbrev}", "libsdp").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// cachedLibsdp says whether the loader's cache (ldconfig -p) maps the name libsdp.so to the
// package's file in libDir. With /lib a link to /usr/lib, the cache may name it under /lib.
func cachedLibsdp(ctx context.Context, t *testing.T, libDir string) bool {
	t.Helper()
	out, err := exec.CommandContext(ctx, "ldconfig", "-p").Output()
	require.NoError(t, err)
	want := strings.TrimPrefix(filepath.Join(libDir, "libsdp.so"), "/usr")
	for _, line := range strings.Split(string(out), "\n") {
		name, target, ok := strings.Cut(strings.TrimSpace(line), " => ")
		if ok && strings.HasPrefix(name, "libsdp.so (") && strings.TrimPrefix(target, "/usr") == want {
			return true
		}
	}
	return false
}

// TestDebPackage: make deb builds a package lintian finds no error in; dpkg -i installs it with
// the libraries in the multiarch directory, where the loader finds LD_PRELOAD=libsdp.so by name;
// a server preloaded that way and a client run by /usr/bin/sdp_run talk over SDP with the
// installed objects; dpkg --purge removes every file again.
func TestDebPackage(t *testing.T) {
	setup(t)
	// Longer than caseTimeout: building the package and lintian take 20 s on an idle machine
	// and 100 s on a loaded one, and dpkg may have to wait for another package manager.
	ctx, cancel := context.WithTimeout(context.Background(), debTimeout)
	t.Cleanup(cancel)
	root := repoRoot(t)
	out, err := exec.CommandContext(ctx, "dpkg-architecture", "-qDEB_HOST_MULTIARCH").Output()
	require.NoError(t, err, "dpkg-architecture (dpkg-dev) is missing: run make deps")
	libDir := filepath.Join("/usr/lib", strings.TrimSpace(string(out)))
	paths := []string{"/usr/bin/sdp_run", "/usr/bin/sdpstat", filepath.Join(libDir, "libsdp.so"),
		filepath.Join(libDir, "libsdp-engine.so"), "/usr/share/doc/libsdp"}

	// The test installs and purges a system package: it must not take the place of one the
	// machine has, nor delete files another installation put there.
	require.Contains(t, []string{"", "un", "pn"}, packageStatus(ctx, t),
		"package libsdp is installed on this machine; the test would replace and purge it "+
			"(remove it with dpkg --purge libsdp if an interrupted run of this test left it)")
	for _, p := range paths {
		_, err := os.Lstat(p)
		require.Truef(t, errors.Is(err, fs.ErrNotExist), "%s exists (another installation); the test would overwrite and delete it", p)
	}

	built := runMake(ctx, t, "deb")
	m := regexp.MustCompile(`deb: built (build/libsdp_\S+\.deb)`).FindStringSubmatch(built)
	require.NotNilf(t, m, "make deb did not say which package it built:\n%s", built)
	deb := filepath.Join(root, m[1])
	assert.NotRegexp(t, `(?m)^E: `, built, "lintian errors")

	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), dpkgLockWait+time.Minute)
		defer cancel()
		if out, err := dpkg(cctx, t, "--purge", "libsdp"); err != nil {
			t.Errorf("cleaning up: %v\n%s", err, out)
		}
	})
	out2, err := dpkg(ctx, t, "-i", deb)
	require.NoError(t, err, out2)
	require.Equal(t, "ii", packageStatus(ctx, t), "dpkg -i %s", deb)

	listing, err := exec.CommandContext(ctx, "dpkg", "-L", "libsdp").Output()
	require.NoError(t, err)
	var owned []string
	for _, p := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		if st, err := os.Lstat(p); err == nil && !st.IsDir() {
			owned = append(owned, p)
		}
	}
	for _, p := range []string{"/usr/bin/sdp_run", "/usr/bin/sdpstat", filepath.Join(libDir, "libsdp.so"),
		filepath.Join(libDir, "libsdp-engine.so"), "/usr/share/doc/libsdp/libsdp.conf.example",
		"/usr/share/doc/libsdp/copyright", "/usr/share/doc/libsdp/changelog.gz",
		"/usr/share/man/man1/sdp_run.1.gz", "/usr/share/man/man1/sdpstat.1.gz"} {
		assert.Containsf(t, owned, p, "the package installs %s", p)
	}
	assert.True(t, cachedLibsdp(ctx, t, libDir), "the ldconfig trigger put libsdp.so in the loader's cache")

	logDir := t.TempDir()
	dumpLogsOnFailure(t, logDir)
	www := t.TempDir()
	sum := makeFile(t, www, "blob", 1<<20)
	port := freePort(t)
	srvEnv := append(cleanEnv(), "LD_PRELOAD=libsdp.so", "SDP_STATS=1", "SDP_LOG_LEVEL=info",
		"SDP_LOG_FILE="+filepath.Join(logDir, "server.%p.log"))
	srv := startProc(ctx, t, "http.server", srvEnv, filepath.Join(logDir, "server.out"),
		python, "-m", "http.server", "--bind", "127.0.0.1", "--directory", www, strconv.Itoa(port))
	srv.waitListening(ctx, t, port, sdpPort(port))

	got := filepath.Join(t.TempDir(), "blob")
	cliEnv := append(cleanEnv(), "SDP_LOG_FILE="+filepath.Join(logDir, "client.%p.log"))
	_, stderr, status := runCmd(ctx, t, cliEnv, append([]string{"/usr/bin/sdp_run", "-v"},
		append(curlArgs, "-o", got, fmt.Sprintf("http://127.0.0.1:%d/blob", port))...)...)
	require.Zerof(t, status, "sdp_run curl: %s", stderr)
	assert.Equal(t, sum, fileSHA(t, got))
	assert.Equal(t, []string{filepath.Join(libDir, "libsdp-engine.so"), filepath.Join(libDir, "libsdp.so")},
		mappedLibsdp(t, srv.cmd.Process.Pid, ""), "the server runs the installed objects")
	stopClean(t, srv)
	assert.EqualValues(t, 1, readStats(t, logDir, "client").n(t, "sdp_conns"), "the client's connection over SDP")
	assert.EqualValues(t, 1, readStats(t, logDir, "server").n(t, "sdp_conns"), "the server's connection over SDP")

	_, stderr, status = runCmd(ctx, t, cleanEnv(), "/usr/bin/sdpstat", "--help")
	assert.Zerof(t, status, "sdpstat --help: %s", stderr)

	out2, err = dpkg(ctx, t, "--purge", "libsdp")
	require.NoError(t, err, out2)
	assert.Contains(t, []string{"", "un", "pn"}, packageStatus(ctx, t), "dpkg --purge left the package")
	for _, p := range append(owned, "/usr/share/doc/libsdp") {
		_, err := os.Lstat(p)
		assert.Truef(t, errors.Is(err, fs.ErrNotExist), "%s is left after dpkg --purge (%v)", p, err)
	}
	assert.False(t, cachedLibsdp(ctx, t, libDir), "libsdp.so is still in the loader's cache")
}
