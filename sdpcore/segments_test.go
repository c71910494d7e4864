package sdpcore

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"libsdp/internal/testnet"
)

// TestFPDUsFillSegmentsOverSmallMSS: over a connection whose segments are
// cut for a 1500-octet MTU (veth, Ethernet), the engine takes the MSS from
// the socket once the handshake is done, cuts FPDUs that fill one segment
// each, and hands every message to the kernel as one record, copies (64 KiB
// Data messages) and zero copy (1 MiB Read Responses) alike. Were every
// FPDU its own record, each would cross both TCP stacks as its own packet:
// between two network namespaces that held libsdp to a fraction of TCP's
// bandwidth. Counted, not timed.
func TestFPDUsFillSegmentsOverSmallMSS(t *testing.T) {
	for _, markers := range []bool{true, false} {
		t.Run(map[bool]string{true: "markers", false: "nomarkers"}[markers], func(t *testing.T) {
			cfd, afd := testnet.TCPPairMSS(t, 1448)
			cfg := testConfig()
			cfg.Markers = markers
			// Aligned (SDP_FPDU_ALIGN=on) over loopback, standing in for a
			// link between hosts.
			cfg.Unaligned, cfg.AlignLocal = false, true
			// Both ends are blocking calls of this test, which the cancel
			// exists to unblock: with the default 20 ms, a loaded machine
			// that kept the reader off the CPU that long saw both offers
			// cancelled and the second half go by copy.
			cfg.ZCopyCancel = 30 * time.Second
			a, p := connPairOn(t, cfg, cfd, afd)
			mss, err := unix.GetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_MAXSEG)
			require.NoError(t, err)
			require.LessOrEqual(t, mss, 1448, "TCP_MAXSEG did not limit the segments")

			until := time.Now().Add(30 * time.Second)
			data := randBytes(4<<20, 7)
			done, half := make(chan error, 1), make(chan struct{})
			go func() {
				// 2 MiB as 64 KiB sends (Data messages), then, once the
				// reader has taken those, 2 MiB in blocking 1 MiB sends a
				// waiting reader takes by zero copy. (A reader still busy
				// with copies when an offer comes may answer it with
				// SendSM, which turns zero copy off for a while: on a
				// loaded machine the second half then went by copy.)
				for off := 0; off < 2<<20; off += 64 << 10 {
					if err := sendBytes(t, a, data[off:off+64<<10], 0, until); err != nil {
						done <- err
						return
					}
				}
				select {
				case <-half:
				case <-time.After(time.Until(until)):
					done <- errors.New("the reader did not take the first half")
					return
				}
				for off := 2 << 20; off < len(data); off += 1 << 20 {
					if err := sendBytes(t, a, data[off:off+1<<20], SendWait, until); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			got, err := recvN(t, p, 2<<20, 1<<20, RecvWait, until)
			require.NoError(t, err)
			close(half)
			rest, err := recvN(t, p, len(data)-len(got), 1<<20, RecvWait, until)
			require.NoError(t, err)
			got = append(got, rest...)
			require.NoError(t, <-done)
			require.True(t, bytes.Equal(data, got), "the bytes received differ from those sent")

			s := a.Stats()
			t.Logf("mss %d: %d FPDUs, %d wire octets, %d records, %d bytes by zero copy", mss, s.Tx.FPDUs, s.Tx.Bytes, s.TxRecords, s.ZCopyTx)
			require.NotZero(t, s.ZCopyTx, "no zero copy: the second half was not covered")
			// ULPDUs of about mss-6-4*3 octets: 4 MiB in about 3000 FPDUs; a
			// few more for credit updates and the zero-copy messages.
			perFPDU := float64(s.Tx.Bytes) / float64(s.Tx.FPDUs)
			require.Greater(t, perFPDU, float64(mss)*0.9, "%d FPDUs, %d wire octets", s.Tx.FPDUs, s.Tx.Bytes)
			require.LessOrEqual(t, perFPDU, float64(mss), "FPDUs longer than a segment")
			require.LessOrEqual(t, s.Tx.FPDUs, uint64(len(data)/(mss-64)+200))
			// 32 Data messages and 2 Read Responses, a record each (more when
			// the socket was full in the middle of one), plus the small messages.
			require.NotZero(t, s.TxRecords)
			require.Less(t, s.TxRecords*8, s.Tx.FPDUs, "%d FPDUs in %d records", s.Tx.FPDUs, s.TxRecords)
		})
	}
}

// TestUnalignedFPDUsSpanSegments: by default (SDP_FPDU_ALIGN=off) FPDUs are
// not cut for the segment size: over a connection with a 1500-octet MTU's
// segments a 64 KiB Data message is two FPDUs, not 46, each framed, checked
// and handed up alone, and the kernel cuts the stream into segments. The
// bytes arrive as sent. Counted, not timed.
func TestUnalignedFPDUsSpanSegments(t *testing.T) {
	for _, markers := range []bool{true, false} {
		t.Run(map[bool]string{true: "markers", false: "nomarkers"}[markers], func(t *testing.T) {
			cfd, afd := testnet.TCPPairMSS(t, 1448)
			cfg := testConfig()
			require.True(t, cfg.Unaligned, "the default aligns FPDUs")
			cfg.Markers = markers
			a, p := connPairOn(t, cfg, cfd, afd)

			until := time.Now().Add(30 * time.Second)
			data := randBytes(2<<20, 11)
			done := sendPieces(t, a, data, 64<<10, until)
			got, err := recvN(t, p, len(data), 1<<20, RecvWait, until)
			require.NoError(t, err)
			require.NoError(t, <-done)
			require.True(t, bytes.Equal(data, got), "the bytes received differ from those sent")

			s, r := a.Stats(), p.Stats()
			t.Logf("%d FPDUs, %d wire octets sent; %d FPDUs received", s.Tx.FPDUs, s.Tx.Bytes, r.Rx.FPDUs)
			// A 64 KiB send is a Data message of 65,520 payload octets (two
			// FPDUs: a ULPDU holds at most 65,535) and one of 16: three FPDUs
			// where aligned ones would be 47 (TestFPDUsFillSegmentsOverSmallMSS).
			require.LessOrEqual(t, s.Tx.FPDUs, uint64(3*32+8), "FPDUs cut smaller than ULPDU_Length allows")
			require.Greater(t, float64(s.Tx.Bytes)/float64(s.Tx.FPDUs), float64(8*1448), "FPDUs of a segment's size")
			// (The sender's last credit update may still be on its way.)
			require.LessOrEqual(t, r.Rx.FPDUs, s.Tx.FPDUs)
			require.Greater(t, float64(r.Rx.Bytes)/float64(r.Rx.FPDUs), float64(8*1448), "FPDUs of a segment's size received")
			if markers {
				require.NotZero(t, r.Rx.Markers)
			}
		})
	}
}

// sendPieces sends data in sends of piece bytes from another goroutine
// and reports the first error, or nil once all is sent, on the channel.
func sendPieces(t *testing.T, c *Conn, data []byte, piece int, until time.Time) <-chan error {
	done := make(chan error, 1)
	go func() {
		for off := 0; off < len(data); off += piece {
			if err := sendBytes(t, c, data[off:min(off+piece, len(data))], 0, until); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}
