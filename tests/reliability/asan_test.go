package reliability

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The C shim built with AddressSanitizer and UndefinedBehaviorSanitizer (build/libsdp-asan.so,
// next to the engine it loads) runs C API test programs of tests/c, both ends in one process,
// and the reliability program's sink and sender. Any sanitizer report fails the test.

// asanShim builds build/libsdp-asan.so from shim.c (as `make asan` does) and returns its path.
func asanShim(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	out := filepath.Join(root, "build", "libsdp-asan.so")
	tmp := out + ".tmp"
	rooms, err := filepath.Glob(filepath.Join(root, "shim", "*.c"))
	require.NoError(t, err)
	args := []string{"-O1", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fPIC",
		"-fvisibility=hidden", "-D_GNU_SOURCE", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
		"-fno-sanitize-recover=undefined", "-shared", "-Wl,--version-script=" + filepath.Join(root, "shim.map"),
		"-I", root, "-o", tmp, filepath.Join(root, "shim.c")}
	args = append(append(args, rooms...), "-ldl", "-lpthread")
	cmd := exec.Command("gcc", args...)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "building the sanitized shim: %s", b)
	require.NoError(t, os.Rename(tmp, out))
	return out
}

func asanEnv(t *testing.T, dir, name, so string, extra ...string) []string {
	t.Helper()
	lib, err := exec.Command("gcc", "-print-file-name=libasan.so").Output()
	require.NoError(t, err)
	libasan := strings.TrimSpace(string(lib))
	_, err = os.Stat(libasan)
	require.NoError(t, err, "libasan.so (gcc's) is missing")
	env := append(cleanEnv(), "LD_PRELOAD="+libasan+" "+so, "SDP_STATS=1", "SDP_LOG_LEVEL=info",
		"SDP_LOG_FILE="+filepath.Join(dir, name+".%p.log"),
		// Leaks are checked: the Go runtime's own memory is not malloc'ed. Go installs its
		// signal handlers after the sanitizer's, so the sanitizer must leave SIGSEGV to Go.
		"ASAN_OPTIONS=detect_leaks=1:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:allow_user_segv_handler=1:abort_on_error=0:exitcode=86",
		"UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87",
		"LSAN_OPTIONS=exitcode=88")
	return append(env, extra...)
}

func TestSanitizedShim(t *testing.T) {
	so := asanShim(t)
	root, _ := filepath.Abs("../..")
	bin := t.TempDir()
	// Programs and their arguments: both ends in one process.
	progs := []struct {
		src, name string
		args      []string
		want      string
	}{
		{"stream", "stream", []string{"self", "-"}, ""},
		{"stream", "stream-duplex", []string{"self", "duplex"}, ""},
		{"poll", "poll", []string{"self", "-"}, ""},
		{"epoll", "epoll", []string{"self", "-"}, ""},
		{"nonblock", "nonblock", []string{"self", "-"}, ""},
		{"close", "close", []string{"self", "-"}, ""},
		{"dup", "dup", []string{"self", "-"}, ""},
		{"ioctl", "ioctl", []string{"self", "-"}, ""},
		{"sendfile", "sendfile", []string{"self", "-"}, ""},
		{"ipv6", "ipv6", []string{"self", "-"}, ""},
		{"nested", "nested", nil, "nest ok"},
		{"closeall", "closeall", nil, "closeall ok"},
		{"follow", "follow", nil, "follow ok"},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	built := map[string]bool{}
	for _, p := range progs {
		if built[p.src] {
			continue
		}
		built[p.src] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command("gcc", "-std=gnu11", "-O1", "-g", "-pthread", "-o", filepath.Join(bin, p.src),
				filepath.Join(root, "tests", "c", p.src+".c")).CombinedOutput()
			if err != nil {
				mu.Lock()
				errs = append(errs, p.src+": "+string(out))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	for _, p := range progs {
		t.Run(p.name, func(t *testing.T) {
			dir := logDir(t)
			pr := start(t, p.name, asanEnv(t, dir, "self", so, "TMPDIR="+dir), filepath.Join(bin, p.src), p.args...)
			require.True(t, pr.wait(2*time.Minute), "%s finished", p.name)
			out := pr.output()
			assert.NoError(t, pr.err, "%s under the sanitized shim:\n%s", p.name, out)
			assert.NotContains(t, out, "AddressSanitizer")
			assert.NotContains(t, out, "LeakSanitizer")
			assert.NotContains(t, out, "runtime error:")
			if p.want != "" {
				assert.Contains(t, out, p.want)
			}
			st := statsOf(t, dir, "self")
			assert.Positive(t, st["sdp_conns"], "the programs ran over SDP")
		})
	}
	t.Run("sink-send", func(t *testing.T) {
		dir := logDir(t)
		srv := start(t, "sink", asanEnv(t, dir, "server", so), relprog, "sink", freePort(t))
		p := srv.port(t)
		waitListening(t, sdpPort(p, 20000), 10*time.Second)
		cli := start(t, "send", asanEnv(t, dir, "client", so), relprog, "send", "127.0.0.1", itoa(p), itoa(4<<20), "4", "3")
		require.True(t, cli.wait(time.Minute))
		assert.NoError(t, cli.err, cli.output())
		assert.Len(t, cli.matching(sentRe), 4)
		for _, l := range cli.matching(sentRe) {
			assert.Contains(t, l, " ok ")
		}
		srv.stopGently(10 * time.Second)
		assert.NoError(t, srv.err, srv.output())
		for _, p := range []*prog{srv, cli} {
			assert.NotContains(t, p.output(), "Sanitizer")
			assert.NotContains(t, p.output(), "runtime error:")
		}
		assert.Equal(t, int64(4), statsOf(t, dir, "client")["sdp_conns"])
	})
}
