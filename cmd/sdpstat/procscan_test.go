package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseHexAddr(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		port int
		ok   bool
	}{
		{"0100007F:1F90", "127.0.0.1:8080", 8080, true},
		{"00000000:0016", "0.0.0.0:22", 22, true},
		{"00000000000000000000000001000000:01BB", "[::1]:443", 443, true},
		{"0000000000000000FFFF00000100007F:0050", "127.0.0.1:80", 80, true},
		{"00000000000000000000000000000000:0050", "[::]:80", 80, true},
		{"0100007F", "", 0, false},
		{"0100007:1F90", "", 0, false},
		{"0100007F:XYZ", "", 0, false},
		{"01000070FF:0050", "", 0, false},
	} {
		got, port, ok := parseHexAddr(c.in)
		assert.Equal(t, c.ok, ok, c.in)
		if c.ok {
			assert.Equal(t, c.want, got, c.in)
			assert.Equal(t, c.port, port, c.in)
		}
	}
}

func TestParseNetTCP(t *testing.T) {
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
   2: garbage
   3: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 0 1
`)
	m := map[uint64]kernelSocket{}
	parseNetTCP(table, m)
	assert.Len(t, m, 2, "the header, a short line and a row without an inode are skipped")
	assert.Equal(t, kernelSocket{local: "127.0.0.1:8080", remote: "0.0.0.0:0", lport: 8080, state: "listen"}, m[4242])
	assert.Equal(t, "established", m[4343].state)
	assert.Equal(t, "127.0.0.1:54321", m[4343].remote)
}

func TestPortOffset(t *testing.T) {
	assert.Equal(t, 20000, portOffset(nil))
	assert.Equal(t, 100, portOffset([]byte("A=1\x00SDP_PORT_OFFSET=100\x00B=2\x00")))
	assert.Equal(t, 20000, portOffset([]byte("SDP_PORT_OFFSET=0\x00")), "out of range: the default, as the shim does")
	assert.Equal(t, 20000, portOffset([]byte("SDP_PORT_OFFSET=x\x00")))
	assert.Equal(t, 20000, portOffset([]byte("XSDP_PORT_OFFSET=5\x00")))
	assert.Equal(t, 10, portOffset([]byte("SDP_PORT_OFFSET= 10 \x00")), "spaces around it, as the shim reads it")
	assert.Equal(t, 7, portOffset([]byte("SDP_PORT_OFFSET=7\x00SDP_PORT_OFFSET=9\x00")), "the first, as getenv")
}

func TestSdpPortOf(t *testing.T) {
	assert.Equal(t, 28080, sdpPortOf(8080, 20000))
	assert.Equal(t, 1024+(60000-1024+20000)%64512, sdpPortOf(60000, 20000), "wraps into 1024..65535")
	assert.Equal(t, 65535, sdpPortOf(65534, 1))
	assert.Equal(t, 1024, sdpPortOf(65535, 1))
}

func TestMapsShim(t *testing.T) {
	assert.True(t, mapsShim([]byte("7f00-7f01 r-xp 00000000 08:01 12 /work/build/libsdp.so\n")))
	assert.True(t, mapsShim([]byte("7f00-7f01 r-xp 00000000 08:01 12 /work/build/libsdp-asan.so\n")))
	assert.True(t, mapsShim([]byte("7f00-7f01 r-xp 00000000 08:01 12 /x/libsdp.so (deleted)\n")))
	assert.False(t, mapsShim([]byte("7f00-7f01 r-xp 00000000 08:01 12 /work/build/libsdp-engine.so\n")))
	assert.False(t, mapsShim([]byte("7f00-7f01 r-xp 00000000 08:01 12 /usr/lib/libsdpfoo.so\n[heap]\n")))
}
