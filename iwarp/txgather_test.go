package iwarp

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGatherReadResponse: a Read Response of several FPDUs goes on the
// wire straight from the source region (no octet copied into the transmit
// buffer), markers and CRC included, and the sink gets every octet; the
// same with the kernel's pieces cut anywhere (the unaligned stream) and
// with the region moved (Rebind) or invalidated before it was written,
// where the queued octets are the region's as they were then.
func TestGatherReadResponse(t *testing.T) {
	for _, align := range []bool{true, false} {
		for _, take := range []string{"none", "rebind", "invalidate"} {
			name := take
			if !align {
				name += "/unaligned"
			}
			t.Run(name, func(t *testing.T) {
				forModes(t, func(t *testing.T, o pairOpts) {
					a, b := largePair(t, o)
					a.qp.SetAlign(align)
					const n = 1<<20 + 333
					src := pattern(n, 9)
					want := append([]byte(nil), src...)
					ss, err := a.qp.Register(src, AccessRemoteRead)
					require.NoError(t, err)
					sink := make([]byte, n)
					sk, err := b.qp.Register(sink, AccessLocalWrite)
					require.NoError(t, err)
					_, err = b.qp.PostReadRequest(ReadRequest{SinkSTag: uint32(sk), Size: n, SrcSTag: uint32(ss)})
					require.NoError(t, err)
					b.flushAll(t)
					waitArrived(t, a, uint64(b.qp.TxStats().Bytes))
					for a.qp.TxPending() == 0 { // a answers: the response is queued, not written
						_, err = a.qp.Fill()
						require.NoError(t, err)
						_, err = a.qp.NextSegment()
						require.ErrorIs(t, err, ErrNeedMore)
					}
					require.EqualValues(t, n, a.qp.TxGathered())
					switch take {
					case "rebind":
						require.True(t, a.qp.Rebind(ss, make([]byte, n)))
					case "invalidate":
						require.True(t, a.qp.Invalidate(ss))
					}
					if take != "none" {
						for i := range src {
							src[i] = 0xEE // the application reuses its buffer
						}
					}
					run(t, a, b, func() bool { return len(b.comps) > 0 || b.err != nil })
					require.NoError(t, b.err)
					require.True(t, bytes.Equal(want, sink))
					if take == "invalidate" {
						require.EqualValues(t, n, a.qp.TxCopied(), "the queued octets were copied before the region went")
					} else {
						require.Zero(t, a.qp.TxCopied(), "no octet copied")
					}
				})
			})
		}
	}
}
