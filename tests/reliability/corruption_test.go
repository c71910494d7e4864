package reliability

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	doneRe = regexp.MustCompile(`^DONE (\S+)`)
	sentRe = regexp.MustCompile(`^SENT \d+ (\S+)`)
	nextRe = regexp.MustCompile(` next=(\S+)`)
)

// corruptionConns is how many connections (one damage each) every kind of damage gets.
const corruptionConns = 50

// TestCorruption runs a preloaded sender and a preloaded receiver whose SDP connections pass
// through a relay that damages the sender's FPDU stream once per connection: one flipped bit
// anywhere, a ULPDU_Length, a marker's FPDUPTR or a CRC. The receiver checks every octet it is
// given against the pattern the sender sent: each damage must end the connection with EIO or
// ECONNRESET at the receiver, and no damaged octet may reach it before that.
func TestCorruption(t *testing.T) {
	injected, detected := 0, 0
	for _, kind := range []damage{damageBit, damageLength, damageMarker, damageCRC} {
		t.Run(kind.String(), func(t *testing.T) {
			inj, det := runCorruption(t, kind, corruptionConns)
			injected += inj
			detected += det
		})
	}
	t.Logf("corruption: %d injected, %d detected", injected, detected)
	fmt.Printf("RELIABILITY corruption injected=%d detected=%d\n", injected, detected)
}

func runCorruption(t *testing.T, kind damage, conns int) (injected, detected int) {
	dir := logDir(t)
	srv := start(t, "sink", sdpEnv(dir, "server", overWire), relprog, "sink", freePort(t))
	p := srv.port(t)
	waitListening(t, sdpPort(p, 20000), 10*time.Second)
	const size = 1 << 20
	rl := newRelay(t, fmt.Sprintf("127.0.0.1:%d", sdpPort(p, 20000)), kind, 16<<10, 900<<10, uint64(kind)+1)
	off := ((rl.port()-p)%64512 + 64512) % 64512
	cli := start(t, "send", sdpEnv(dir, "client", overWire, "SDP_PORT_OFFSET="+strconv.Itoa(off)), relprog,
		"send", "127.0.0.1", strconv.Itoa(p), strconv.Itoa(size), strconv.Itoa(conns), "1000")
	require.True(t, cli.wait(2*time.Minute), "the sender did not finish within 2 minutes:\n%s", cli.output())
	require.NoError(t, cli.err)
	dones := srv.waitLines(doneRe, conns, 30*time.Second)
	require.Len(t, dones, conns, "one DONE line per connection from the receiver")
	injs := rl.injections()
	require.Len(t, injs, conns, "every connection went through the relay (SDP, not TCP)")
	for i, in := range injs {
		if !in.done {
			continue
		}
		injected++
		res := doneRe.FindStringSubmatch(dones[i])[1]
		switch res {
		case "err=EIO", "err=ECONNRESET":
			detected++
		case "ok":
			t.Errorf("connection %d: damage (%s at octet %d) not detected: the stream was accepted whole", i, kind, in.offset)
		default:
			t.Errorf("connection %d: damage (%s at octet %d): receiver says %q, want err=EIO or err=ECONNRESET", i, kind, in.offset, dones[i])
		}
	}
	next := map[string]int{}
	for _, d := range dones {
		if m := nextRe.FindStringSubmatch(d); m != nil {
			next[m[1]]++
		}
	}
	t.Logf("%s: what the receiver's next read returned after the error: %v", kind, next)
	assert.Equal(t, conns, injected, "damage injected in every connection")
	assert.Equal(t, injected, detected, "damage detected")
	for _, l := range srv.matching(regexp.MustCompile(`corrupt`)) {
		t.Errorf("a damaged octet reached the application: %s", l)
	}
	srv.stopGently(10 * time.Second)
	st := statsOf(t, dir, "server")
	assert.Equal(t, int64(conns), st["sdp_conns"], "receiver: every connection over SDP")
	t.Logf("%s: %d injected, %d detected; receiver crc_errors=%d", kind, injected, detected, st["crc_errors"])
	return injected, detected
}
