package reliability

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var atRe = regexp.MustCompile(`^AT (\d+) fds=(\d+) rss=(\d+)`)

// soakCycles is 10,000 in make test; scripts/soak.sh sets RELIABILITY_SOAK_CYCLES=100000.
func soakCycles() int {
	if n, err := strconv.Atoi(os.Getenv("RELIABILITY_SOAK_CYCLES")); err == nil && n >= 100 {
		return n
	}
	return 10000
}

// TestSoak runs connect / send 1 KiB / read the echo / close cycles between a preloaded client
// and a preloaded epoll echo server, and checks at ten points that neither process's descriptor
// count nor resident memory grows: both must be flat from the second point on.
func TestSoak(t *testing.T) {
	cycles := soakCycles()
	dir := logDir(t)
	srv := start(t, "echo", sdpEnv(dir, "server", "SDP_LOG_LEVEL=warn"), relprog, "echo", freePort(t))
	p := srv.port(t)
	waitListening(t, sdpPort(p, 20000), 10*time.Second)
	begin := time.Now()
	// SDP_SHORT_TCP=0: every cycle over SDP, though each carries little (it is SDP's
	// resources that must not grow).
	cli := start(t, "soak", sdpEnv(dir, "client", "SDP_LOG_LEVEL=warn", "SDP_SHORT_TCP=0"), relprog, "soak", "127.0.0.1",
		strconv.Itoa(p), strconv.Itoa(cycles), "1024")
	type point struct {
		cycle          int
		cliFds, srvFds int
		cliRSS, srvRSS int64
	}
	var pts []point
	for k := 1; k <= 10; k++ {
		line := cli.waitLine(t, regexp.MustCompile(fmt.Sprintf(`^AT %d `, k*(cycles/10))), 15*time.Minute)
		m := atRe.FindStringSubmatch(line)
		require.NotNil(t, m, line)
		var pt point
		pt.cycle, _ = strconv.Atoi(m[1])
		pt.cliFds, _ = strconv.Atoi(m[2])
		pt.cliRSS, _ = strconv.ParseInt(m[3], 10, 64)
		pt.srvFds, pt.srvRSS = fdCount(t, srv.pid()), rssKiB(t, srv.pid())
		pts = append(pts, pt)
	}
	cli.waitLine(t, regexp.MustCompile(`^SOAK ok`), time.Minute)
	require.True(t, cli.wait(time.Minute))
	require.NoError(t, cli.err, cli.output())
	elapsed := time.Since(begin)
	for _, pt := range pts {
		t.Logf("cycle %7d: client fds %d rss %d KiB; server fds %d rss %d KiB", pt.cycle, pt.cliFds, pt.cliRSS, pt.srvFds, pt.srvRSS)
	}
	// Descriptors and memory move a little as connections finish closing in the background and
	// the Go heap breathes; a leak moves the floor. The floor of the last three points must not
	// be above the ceiling of the first three (after the first 10%).
	early, late := pts[1:4], pts[7:]
	ceil := func(f func(point) int64) int64 {
		m := int64(0)
		for _, pt := range early {
			m = max(m, f(pt))
		}
		return m
	}
	floor := func(f func(point) int64) int64 {
		m := int64(1 << 62)
		for _, pt := range late {
			m = min(m, f(pt))
		}
		return m
	}
	cliFds := func(pt point) int64 { return int64(pt.cliFds) }
	srvFds := func(pt point) int64 { return int64(pt.srvFds) }
	cliRSS := func(pt point) int64 { return pt.cliRSS }
	srvRSS := func(pt point) int64 { return pt.srvRSS }
	// Slack: a few descriptors of connections still closing, and the Go heap's breathing
	// (RSS moves by up to 5 MB between points here). A leak of one descriptor or 1 KiB per
	// cycle moves the floor by 1,000 descriptors or 10 MB over 10,000 cycles.
	assert.LessOrEqual(t, floor(cliFds), ceil(cliFds)+4, "client descriptors are flat")
	assert.LessOrEqual(t, floor(srvFds), ceil(srvFds)+4, "server descriptors are flat")
	assert.LessOrEqual(t, floor(cliRSS), ceil(cliRSS)+8192, "client RSS is flat (KiB)")
	assert.LessOrEqual(t, floor(srvRSS), ceil(srvRSS)+8192, "server RSS is flat (KiB)")
	ref, last := pts[1], pts[len(pts)-1]
	srv.stopGently(30 * time.Second)
	st := statsOf(t, dir, "client")
	assert.Equal(t, int64(cycles), st["sdp_conns"], "every cycle over SDP")
	t.Logf("soak: %d cycles in %v", cycles, elapsed.Round(time.Millisecond))
	fmt.Printf("RELIABILITY soak cycles=%d seconds=%.1f client_fds=%d->%d client_rss_kib=%d->%d server_fds=%d->%d server_rss_kib=%d->%d\n",
		cycles, elapsed.Seconds(), ref.cliFds, last.cliFds, ref.cliRSS, last.cliRSS, ref.srvFds, last.srvFds, ref.srvRSS, last.srvRSS)
}
