package reliability

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnginePanic makes the receiving program's engine panic once (SDP_TEST_PANIC, a test-only
// switch) in the middle of a transfer, for each kind of call. The panic must cost that one
// connection an error (EIO), the program must live, and its later connections must work.
func TestEnginePanic(t *testing.T) {
	for _, op := range []string{"recv", "poll", "any"} {
		t.Run(op, func(t *testing.T) {
			dir := logDir(t)
			srv := start(t, "sink", sdpEnv(dir, "server", "SDP_TEST_PANIC="+op+":20"), relprog, "sink")
			p := srv.port(t)
			waitListening(t, sdpPort(p, 20000), 10*time.Second)
			const conns = 4
			cli := start(t, "send", sdpEnv(dir, "client"), relprog, "send", "127.0.0.1", strconv.Itoa(p),
				strconv.Itoa(8<<20), strconv.Itoa(conns), "77")
			require.True(t, cli.wait(time.Minute), "the sender finished")
			dones := srv.waitLines(doneRe, conns, 20*time.Second)
			require.Len(t, dones, conns)
			assert.Contains(t, dones[0], "DONE err=EIO", "the connection that met the panic gets EIO")
			// The descriptor stays open until the program closes it; its calls keep
			// getting the error that ended its connection, not EBADF.
			m := nextRe.FindStringSubmatch(dones[0])
			require.NotNil(t, m, "the sink reports what the read after the error returned: %q", dones[0])
			assert.Equal(t, "EIO", m[1], "the read after the panic")
			for i, d := range dones[1:] {
				assert.Contains(t, d, "DONE ok", "connection %d after the panic", i+1)
			}
			require.False(t, srv.exited(), "the program lives after the panic")
			srv.stopGently(10 * time.Second)
			st := statsOf(t, dir, "server")
			assert.Equal(t, int64(1), st["panics"], "one panic counted")
			assert.Equal(t, int64(conns), st["sdp_conns"])
			assert.True(t, strings.Contains(logText(t, dir, "server"), "injected fault"), "the panic is logged")
		})
	}
}
