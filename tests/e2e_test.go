package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBothPreloaded: curl and http.server both run libsdp, so the download goes over SDP.
func TestBothPreloaded(t *testing.T) {
	const size = 32 << 20
	dir := download(t, true, true, size, "over SDP")

	c := readStats(t, dir, "client")
	assert.EqualValues(t, 1, c.n(t, "sdp_conns"), "client connections over SDP")
	assert.EqualValues(t, 0, c.n(t, "tcp_conns"), "client connections that fell back to TCP")
	assert.GreaterOrEqual(t, c.n(t, "payload_rx"), int64(size), "application bytes received over SDP")
	assert.Positive(t, c.n(t, "fpdus_rx"), "FPDUs received")
	// Between two ends on this host that allow shared memory, no markers and no CRC.
	framed := defaultLink() != "shm"
	assert.Equal(t, framed, c.n(t, "markers_rx") > 0, "markers received")
	assert.Equal(t, framed, c.n(t, "crc_bytes_rx") > 0, "bytes checked by CRC")
	assert.EqualValues(t, 0, c.n(t, "crc_errors"), "CRC errors")
	assert.Contains(t, logText(t, dir, "client"), "transport=sdp")

	s := readStats(t, dir, "server")
	assert.GreaterOrEqual(t, s.n(t, "sdp_conns"), int64(1), "server connections over SDP")
	assert.GreaterOrEqual(t, s.n(t, "payload_tx"), int64(size), "application bytes sent over SDP")
}

// download has curl fetch a file of size bytes from python3 http.server, each preloaded or
// not, and checks the bytes (how names the case in the message); it returns the directory of
// their logs, once the server has stopped.
func download(t *testing.T, srvPreload, cliPreload bool, size int64, how string) string {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	www := filepath.Join(dir, "www")
	require.NoError(t, os.Mkdir(www, 0o755))
	want := makeFile(t, www, "file.bin", size)
	port := freePort(t)
	srv := startServer(ctx, t, preloadIf(shim, srvPreload), www, dir, port)
	out := filepath.Join(dir, "download.bin")
	require.NoError(t, curl(ctx, preloadIf(shim, cliPreload), dir, "-o", out, fmt.Sprintf("http://127.0.0.1:%d/file.bin", port)))
	require.Equal(t, want, fileSHA(t, out), "the file downloaded %s differs", how)
	srv.stop()
	return dir
}

// preloadIf is shim when on, else "" (no preload).
func preloadIf(shim string, on bool) string {
	if on {
		return shim
	}
	return ""
}

// TestPreloadedClientPlainServer: only curl runs libsdp; nothing listens on the SDP port, so
// the connection falls back to TCP and the download still works.
func TestPreloadedClientPlainServer(t *testing.T) {
	dir := download(t, false, true, 4<<20, "over the TCP fallback")

	c := readStats(t, dir, "client")
	assert.EqualValues(t, 0, c.n(t, "sdp_conns"), "client connections over SDP")
	assert.EqualValues(t, 1, c.n(t, "tcp_conns"), "client connections that fell back to TCP")
	assert.Regexp(t, `transport=tcp reason=\S+`, logText(t, dir, "client"))
}

// TestPlainClientPreloadedServer: only http.server runs libsdp; a plain client reaches it on the
// application port over TCP.
func TestPlainClientPreloadedServer(t *testing.T) {
	dir := download(t, true, false, 4<<20, "by a plain client")

	s := readStats(t, dir, "server")
	assert.GreaterOrEqual(t, s.n(t, "tcp_conns"), int64(1), "server connections over TCP")
	assert.EqualValues(t, 0, s.n(t, "sdp_conns"), "server connections over SDP")
}

// TestManyDownloads: one preloaded server serves sequential downloads, concurrent curl
// processes, and one curl fetching several files in parallel; every file arrives intact and
// every connection runs over SDP.
func TestManyDownloads(t *testing.T) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	dumpLogsOnFailure(t, dir)
	www := filepath.Join(dir, "www")
	require.NoError(t, os.Mkdir(www, 0o755))
	files := map[string]string{
		"big.bin":   makeFile(t, www, "big.bin", 4<<20),
		"mid.bin":   makeFile(t, www, "mid.bin", 300<<10+7),
		"small.bin": makeFile(t, www, "small.bin", 100),
		"empty.bin": makeFile(t, www, "empty.bin", 0),
	}
	names := []string{"big.bin", "mid.bin", "small.bin", "empty.bin"}

	port := freePort(t)
	srv := startServer(ctx, t, shim, www, dir, port)
	url := func(name string) string { return fmt.Sprintf("http://127.0.0.1:%d/%s", port, name) }

	type run struct {
		logDir string
		outs   map[string]string // downloaded path → file name
	}
	var runs []run
	newRun := func(id string) run {
		r := run{logDir: filepath.Join(dir, id), outs: map[string]string{}}
		require.NoError(t, os.Mkdir(r.logDir, 0o755))
		runs = append(runs, r)
		return r
	}

	// Sequential: one curl process after another.
	for i := range 3 {
		r := newRun(fmt.Sprintf("seq%d", i))
		name := names[i%len(names)]
		out := filepath.Join(r.logDir, name)
		r.outs[out] = name
		require.NoError(t, curl(ctx, shim, r.logDir, "-o", out, url(name)))
	}

	// Concurrent: several curl processes at once.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		r := newRun(fmt.Sprintf("conc%d", i))
		out := filepath.Join(r.logDir, "big.bin")
		r.outs[out] = "big.bin"
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- curl(ctx, shim, r.logDir, "-o", out, url("big.bin"))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Parallel transfers inside one curl process.
	r := newRun("parallel")
	args := []string{"--parallel", "--parallel-max", "4"}
	for _, name := range names {
		out := filepath.Join(r.logDir, name)
		r.outs[out] = name
		args = append(args, "-o", out, url(name))
	}
	require.NoError(t, curl(ctx, shim, r.logDir, args...))
	srv.stop()

	var clientSDP int64
	for _, r := range runs {
		for out, name := range r.outs {
			assert.Equalf(t, files[name], fileSHA(t, out), "%s downloaded in %s", name, filepath.Base(r.logDir))
		}
		c := readStats(t, r.logDir, "client")
		assert.Positivef(t, c.n(t, "sdp_conns"), "connections over SDP in %s", filepath.Base(r.logDir))
		assert.EqualValuesf(t, 0, c.n(t, "tcp_conns"), "connections that fell back to TCP in %s", filepath.Base(r.logDir))
		assert.EqualValuesf(t, 0, c.n(t, "crc_errors"), "CRC errors in %s", filepath.Base(r.logDir))
		clientSDP += c.n(t, "sdp_conns")
	}
	s := readStats(t, dir, "server")
	assert.Equal(t, clientSDP, s.n(t, "sdp_conns"), "server connections over SDP (the clients made %d)", clientSDP)
	assert.EqualValues(t, 0, s.n(t, "tcp_conns"), "server connections over TCP")
}
