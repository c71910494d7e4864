package sdpcore

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"libsdp/iwarp"
)

// FuzzHelloAck parses arbitrary private data as a HelloAck; whatever
// parses must encode back to a HelloAck that parses to the same values.
func FuzzHelloAck(f *testing.F) {
	f.Add(AppendHelloAck(nil, &HelloAck{Bufs: 16, IPVersion: 4, ActRcvSz: 65536}))
	f.Add(AppendHelloAck(nil, &HelloAck{Bufs: 16, IPVersion: 6, ActRcvSz: 65536, FlowControl: FlowNIC, RingSTag: 0x102, RingSize: 1 << 20}))
	f.Add(AppendHelloAck(nil, &HelloAck{Bufs: 4, IPVersion: 4, ActRcvSz: 1040, FlowControl: FlowTransport}))
	f.Add(AppendHelloAck(nil, &HelloAck{Bufs: 16, IPVersion: 4, ActRcvSz: 65536, Cap: CapSameHost, SameHost: [16]byte{1, 2, 3}}))
	f.Fuzz(func(t *testing.T, pd []byte) {
		h, err := ParseHelloAck(pd)
		if err != nil {
			return
		}
		again, err := ParseHelloAck(AppendHelloAck(nil, &h))
		require.NoError(t, err)
		require.Equal(t, h, again)
	})
}

// FuzzHello does the same for Hello, the flow-control byte included.
func FuzzHello(f *testing.F) {
	f.Add(AppendHello(nil, &Hello{Bufs: 16, IPVersion: 4, LocalRcvSz: 65536, DesRemRcvSz: 65536, FlowControl: FlowRDMA}))
	f.Add(AppendHello(nil, &Hello{Bufs: 16, IPVersion: 6, LocalRcvSz: 65536, DesRemRcvSz: 65536}))
	f.Fuzz(func(t *testing.T, pd []byte) {
		h, err := ParseHello(pd)
		if err != nil {
			return
		}
		again, err := ParseHello(AppendHello(nil, &h))
		require.NoError(t, err)
		require.Equal(t, h, again)
	})
}

// FuzzRingData feeds a receive ring a sequence of Immediate Data messages
// and reads: whatever the peer claims, the ring never holds more than its
// size, a read never returns more than was announced, and a bad claim is
// an error rather than a panic.
func FuzzRingData(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 0, 0, 0, 0x80})
	f.Add([]byte{0, 0, 16, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0, 0, 0, 0x7f})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const size = 4096
		c := &Conn{ring: make([]byte, size), tr: overQP(iwarp.NewQP(-1)), fc: FlowRDMA, st: stEstablished}
		c.ringWr = 1 << 20 // bytes we "sent", for the acknowledgement check
		buf := make([]byte, 512)
		for len(ops) >= 9 {
			imm := ops[:8]
			rd := int(ops[8])
			ops = ops[9:]
			n := binary.BigEndian.Uint32(imm)
			before := c.ringIn
			if err := c.onRingData(imm); err != nil {
				require.Equal(t, before, c.ringIn, "a refused message announces nothing")
				continue
			}
			require.Equal(t, before+n, c.ringIn)
			require.LessOrEqual(t, c.ringIn-c.ringFreed, uint32(size))
			require.Equal(t, int(c.ringIn-c.ringFreed), c.rqBytes)
			got := c.copyOut([][]byte{buf[:min(rd, len(buf))]}, false)
			require.LessOrEqual(t, got, rd)
			require.Equal(t, int(c.ringIn-c.ringFreed), c.rqBytes)
		}
	})
}
