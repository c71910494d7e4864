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
			// The 20th call of the kind falls in whichever connection makes it (how many
			// calls a transfer takes is the engine's business): that one gets EIO, every
			// other one works.
			hit := -1
			for i, d := range dones {
				if !strings.Contains(d, "DONE ok") {
					require.Equal(t, -1, hit, "one connection met the panic: %q", dones)
					hit = i
				}
			}
			require.NotEqual(t, -1, hit, "a connection met the panic: %q", dones)
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
			assert.Equal(t, int64(conns), st["sdp_conns"])
			assert.True(t, strings.Contains(logText(t, dir, "server"), "injected fault"), "the panic is logged")
		})
	}
}
