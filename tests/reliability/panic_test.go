package reliability

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnginePanic makes one program's engine panic once (SDP_TEST_PANIC, a test-only switch) in
// the middle of a transfer, for each kind of call: the receiving program's for recv, poll and any,
// the sending program's for send (both ends preloaded either way). The panic must cost that one
// connection an error (EIO), the program must live, and its other connections must work.
func TestEnginePanic(t *testing.T) {
	// The call that panics is the n-th of its kind. A transfer makes thousands of
	// receives, but its polls vary from run to run (5 to 386 for the four
	// transfers, measured over shared memory): only a low n is always reached.
	for _, f := range []struct {
		op string
		n  int
	}{{"recv", 20}, {"poll", 3}, {"any", 20}} {
		op := f.op
		t.Run(op, func(t *testing.T) {
			dir := logDir(t)
			srv := start(t, "sink", sdpEnv(dir, "server", "SDP_TEST_PANIC="+op+":"+strconv.Itoa(f.n)), relprog, "sink", freePort(t))
			p := srv.port(t)
			waitListening(t, sdpPort(p, 20000), 10*time.Second)
			const conns = 4
			cli := start(t, "send", sdpEnv(dir, "client"), relprog, "send", "127.0.0.1", strconv.Itoa(p),
				strconv.Itoa(8<<20), strconv.Itoa(conns), "77")
			require.True(t, cli.wait(time.Minute), "the sender finished")
			dones := srv.waitLines(doneRe, conns, 20*time.Second)
			require.Len(t, dones, conns)
			// The n-th call of the kind falls in whichever connection makes it (how many
			// calls a transfer takes is the engine's business): that one gets EIO, every
			// other one works.
			hit := onlyFailure(t, dones, "DONE ok")
			assert.Contains(t, dones[hit], "DONE err=EIO", "the connection that met the panic gets EIO")
			// The descriptor stays open until the program closes it; its calls keep
			// getting the error that ended its connection, not EBADF.
			m := nextRe.FindStringSubmatch(dones[hit])
			require.NotNil(t, m, "the sink reports what the read after the error returned: %q", dones[hit])
			assert.Equal(t, "EIO", m[1], "the read after the panic")
			require.False(t, srv.exited(), "the program lives after the panic")
			srv.stopGently(10 * time.Second)
			st := statsOf(t, dir, "server")
			assert.Equal(t, int64(1), st["panics"], "one panic counted")
			if strings.Contains(dones[hit], " bytes=0 ") {
				// The panic may have come before the connection's handshake
				// ended (its first call), and such a one is not counted as SDP.
				assert.Contains(t, []int64{conns - 1, conns}, st["sdp_conns"])
			} else {
				assert.Equal(t, int64(conns), st["sdp_conns"])
			}
			assert.True(t, strings.Contains(logText(t, dir, "server"), "injected fault"), "the panic is logged")
		})
	}
	// send: the sender's engine panics in its 20th send call, which the shim makes through
	// sdp_sendv_flags. Its connections run one after another, so the later ones prove that
	// the program lived on.
	t.Run("send", func(t *testing.T) {
		dir := logDir(t)
		srv := start(t, "sink", sdpEnv(dir, "server"), relprog, "sink", freePort(t))
		p := srv.port(t)
		waitListening(t, sdpPort(p, 20000), 10*time.Second)
		const conns = 4
		cli := start(t, "send", sdpEnv(dir, "client", "SDP_TEST_PANIC=send:20"), relprog, "send", "127.0.0.1",
			strconv.Itoa(p), strconv.Itoa(8<<20), strconv.Itoa(conns), "77")
		require.True(t, cli.wait(time.Minute), "the sender finished")
		sent := cli.matching(sentRe)
		require.Len(t, sent, conns, "one line per connection: %q", cli.output())
		hit := onlyFailure(t, sent, " ok ")
		assert.Contains(t, sent[hit], " err=EIO ", "the connection that met the panic gets EIO")
		for i := hit + 1; i < conns; i++ {
			assert.Contains(t, sent[i], " ok ", "a connection after the panic works")
		}
		// The sink sees the broken connection end early (reset or short), the others whole.
		dones := srv.waitLines(doneRe, conns, 20*time.Second)
		require.Len(t, dones, conns)
		oks := 0
		for _, d := range dones {
			if strings.Contains(d, "DONE ok") {
				oks++
			}
		}
		assert.Equal(t, conns-1, oks, "every connection but the one that met the panic arrives whole: %q", dones)
		srv.stopGently(10 * time.Second)
		st := statsOf(t, dir, "client")
		assert.Equal(t, int64(1), st["panics"], "one panic counted")
		assert.Equal(t, int64(conns), st["sdp_conns"])
		assert.True(t, strings.Contains(logText(t, dir, "client"), "injected fault"), "the panic is logged")
	})
}

// onlyFailure returns the index of the one line of lines without ok, and
// fails the test unless there is exactly one.
func onlyFailure(t *testing.T, lines []string, ok string) int {
	t.Helper()
	hit := -1
	for i, l := range lines {
		if !strings.Contains(l, ok) {
			require.Equal(t, -1, hit, "one connection met the panic: %q", lines)
			hit = i
		}
	}
	require.NotEqual(t, -1, hit, "a connection met the panic: %q", lines)
	return hit
}
