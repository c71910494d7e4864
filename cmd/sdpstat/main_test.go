package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"libsdp/internal/statsfile"
)

func TestParseArgs(t *testing.T) {
	good := map[string]options{
		"":               {},
		"--json":         {json: true},
		"-j -p 42":       {json: true, pid: 42},
		"--pid=7":        {pid: 7},
		"-w":             {watch: time.Second},
		"-w 2":           {watch: 2 * time.Second},
		"-w 0.5 --json":  {watch: 500 * time.Millisecond, json: true},
		"--watch=3 -p 1": {watch: 3 * time.Second, pid: 1},
		"-w -p 9":        {watch: time.Second, pid: 9},
	}
	for args, want := range good {
		got, err := parseArgs(strings.Fields(args))
		require.NoErrorf(t, err, "%q", args)
		assert.Equalf(t, want, got, "%q", args)
	}
	for _, args := range []string{"-p", "-p x", "-p 0", "-p -3", "-w x", "-w 0", "--json=1", "-x", "extra"} {
		_, err := parseArgs(strings.Fields(args))
		assert.Errorf(t, err, "%q", args)
	}
	_, err := parseArgs([]string{"--help"})
	assert.ErrorIs(t, err, errHelp)
}

func sample() []statsfile.Entry {
	d := &statsfile.SDP{State: "up", FlowControl: "credit", Buffering: "separate", Progress: "inline", PayloadTx: 100, UserCopiesTx: 100,
		FPDUsTx: 3, BCopyTx: 100}
	d.SetCopiesPerByte()
	return []statsfile.Entry{{Process: statsfile.Process{Version: statsfile.Version, PID: 12, Prog: "srv",
		EngineLoaded: true, Sockets: []statsfile.Socket{
			{FD: 3, Kind: "listen", Transport: "tcp+sdp", Local: "127.0.0.1:80", SDPPort: 20080, State: "listen"},
			{FD: 4, Kind: "sdp", Transport: "sdp", Local: "127.0.0.1:80", Remote: "127.0.0.1:999", State: "established", SDP: d},
			{FD: 5, Kind: "tcp", Transport: "tcp", Reason: "plain-peer", Local: "127.0.0.1:80", Remote: "127.0.0.1:998", State: "established"},
		}}, Age: 300 * time.Millisecond}}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	writeTable(&b, sample())
	out := b.String()
	assert.Contains(t, out, "PID 12  srv  sockets=3 sdp=1 tcp=1")
	assert.Contains(t, out, "127.0.0.1:80 (sdp 20080)")
	assert.Regexp(t, `(?m)^4 +sdp +sdp +- +127\.0\.0\.1:80 +127\.0\.0\.1:999 +established +up +credit +separate +inline +100 +0 +3 `, out)
	assert.Regexp(t, `(?m)^5 +tcp +tcp +plain-peer `, out)
	assert.Contains(t, out, "1.00/0.00")
	assert.NotContains(t, out, "engine not loaded")

	// A preloaded process found in /proc, without an engine yet.
	b.Reset()
	e := sample()
	e[0].EngineLoaded = false
	e[0].Sockets = e[0].Sockets[:1]
	writeTable(&b, e)
	assert.Contains(t, b.String(), "engine not loaded")
	assert.Regexp(t, `(?m)^3 +listen +tcp\+sdp +- +127\.0\.0\.1:80 \(sdp 20080\) +- +listen +-`, b.String())

	b.Reset()
	writeTable(&b, nil)
	assert.Contains(t, b.String(), "no process is using libsdp")
}

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeJSON(&b, sample()))
	var doc struct {
		Processes []struct {
			PID     int   `json:"pid"`
			AgeMs   int64 `json:"age_ms"`
			Sockets []struct {
				Transport string          `json:"transport"`
				SDPPort   int             `json:"sdp_port"`
				SDP       json.RawMessage `json:"sdp"`
			} `json:"sockets"`
		} `json:"processes"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	require.Len(t, doc.Processes, 1)
	p := doc.Processes[0]
	assert.Equal(t, 12, p.PID)
	assert.EqualValues(t, 300, p.AgeMs)
	require.Len(t, p.Sockets, 3)
	assert.Equal(t, 20080, p.Sockets[0].SDPPort)
	assert.Contains(t, string(p.Sockets[1].SDP), `"copies_per_byte_tx":1`)

	b.Reset()
	require.NoError(t, writeJSON(&b, nil))
	assert.JSONEq(t, `{"processes":[]}`, b.String())
}
