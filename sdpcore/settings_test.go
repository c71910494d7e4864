package sdpcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"libsdp/internal/settings"
)

// TestDefaultsAreTheTable: DefaultConfig starts from the defaults the
// settings table (and so the shim, the README) gives, and the modes' codes
// are their words' indices there.
func TestDefaultsAreTheTable(t *testing.T) {
	d := DefaultConfig()
	def := func(s *settings.Setting) int64 { return s.Def() }
	assert.Equal(t, def(settings.Markers) == 1, d.Markers)
	assert.Equal(t, def(settings.CRC) == 1, d.CRC)
	assert.Equal(t, def(settings.FPDUAlign) == 0, d.Unaligned)
	assert.Equal(t, def(settings.FPDUAlign) == 1, d.AlignLocal)
	assert.EqualValues(t, def(settings.MarkerSpacing), d.MarkerSpacing)
	assert.EqualValues(t, def(settings.BufSize), d.BufSize)
	assert.EqualValues(t, def(settings.RecvBufs), d.RecvBufs)
	assert.Equal(t, time.Duration(def(settings.ConnectTimeout))*time.Millisecond, d.ConnectTimeout)
	assert.Equal(t, time.Duration(def(settings.HandshakeTimeout))*time.Millisecond, d.HandshakeTimeout)
	assert.EqualValues(t, def(settings.FlowControl), d.FlowControl)
	assert.EqualValues(t, def(settings.Buffering), d.Buffering)
	assert.EqualValues(t, def(settings.Progress), d.Progress)
	assert.EqualValues(t, def(settings.ZCopyThreshold), d.ZCopyThreshold)
	assert.Equal(t, def(settings.SharedMemory) == 1, d.SameHost)
	assert.Equal(t, time.Duration(def(settings.PollUS))*time.Microsecond, d.PollSpin)
	assert.EqualValues(t, settings.BufSize.Max, maxRecvBufSz)
	assert.EqualValues(t, settings.BufSize.Min, minRecvBufSz)
	assert.EqualValues(t, settings.RecvBufs.Min, minRecvBufs)
	assert.EqualValues(t, settings.RecvBufs.Max, maxRecvBufs)
	assert.Len(t, settings.FlowControl.Values, int(numFlowControls))
	for _, m := range []Buffering{BufIntegrated, BufSeparate} {
		assert.Equal(t, settings.Buffering.Values[m], m.String())
	}
	for _, m := range []Progress{ProgressInline, ProgressAsync} {
		assert.Equal(t, settings.Progress.Values[m], m.String())
	}
}

// TestFromEnv: unset is the default, a bad value the default and one
// warning, and the values come back in the table's order.
func TestFromEnv(t *testing.T) {
	env := map[string]string{"SDP_FLOW_CONTROL": " NIC ", "SDP_ZCOPY_THRESHOLD": "64k", "SDP_PROGRESS": "async"}
	var warned []error
	c := DefaultConfig()
	vs := c.FromEnv(func(k string) string { return env[k] }, func(err error) { warned = append(warned, err) })
	assert.Equal(t, FlowNIC, c.FlowControl)
	assert.Equal(t, ProgressAsync, c.Progress)
	assert.Equal(t, DefaultZCopyThreshold, c.ZCopyThreshold)
	assert.Equal(t, 10*time.Second, c.HandshakeTimeout)
	if assert.Len(t, warned, 1) {
		assert.EqualError(t, warned[0], `SDP_ZCOPY_THRESHOLD="64k" is not a decimal integer >= 0; using 0`)
	}
	assert.Equal(t, "SDP_HANDSHAKE_TIMEOUT=10000 SDP_FLOW_CONTROL=nic SDP_BUFFERING=integrated SDP_PROGRESS=async SDP_ZCOPY_THRESHOLD=0 SDP_SHM=1 SDP_POLL_US=50",
		settings.Line(vs))
}
