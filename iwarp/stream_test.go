package iwarp

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pipeStream is a ByteStream over a buffer each way, for the QP's side of
// the contract; EAGAIN when the buffer is empty.
type pipeStream struct {
	in, out *bytes.Buffer
	reads   int
}

func (s *pipeStream) Read(b []byte) (int, error) {
	s.reads++
	if s.in.Len() == 0 {
		return 0, unix.EAGAIN
	}
	return s.in.Read(b)
}

func (s *pipeStream) Write(b []byte) (int, error) { return s.out.Write(b) }
func (s *pipeStream) SetFd(int)                   {}

// TestStreamQP: a QP with a stream sends what it queued before Full
// Operation (the MPA Reply) to its socket and every FPDU after to the
// stream, reads FPDUs from the stream only, and says it is drained only
// after the stream was found empty: a read of the socket that emptied it
// before the switch (the MPA frame's) must not let a caller wait on the
// socket before the stream has been read, which is what tells the peer
// to ring.
func TestStreamQP(t *testing.T) {
	cfd, afd := tcpPair(t)
	q := NewQP(cfd)
	ab, ba := new(bytes.Buffer), new(bytes.Buffer)
	s := &pipeStream{in: ba, out: ab}
	q.UseStream(s)
	// The peer's MPA frame arrives and is taken from the socket.
	_, err := unix.Write(afd, []byte("request"))
	require.NoError(t, err)
	for i := 0; i < 1000 && len(q.Raw()) < 7; i++ {
		_, err := q.Fill()
		if err != unix.EAGAIN {
			require.NoError(t, err)
		}
	}
	require.Equal(t, "request", string(q.Raw()))
	q.ConsumeRaw(7)
	_, _ = q.Fill() // the socket is empty now
	require.True(t, q.Drained())
	q.WriteRaw([]byte("reply"))
	q.StartFullOperation(false, false, false, 512, 1460)
	require.False(t, q.Drained(), "the stream has not been read")
	q.PostSend(OpSend, []byte("hello over the stream"))
	require.NoError(t, q.Flush())
	got := make([]byte, 16)
	n, err := unix.Read(afd, got)
	require.NoError(t, err)
	require.Equal(t, "reply", string(got[:n]), "only the MPA Reply crossed the socket")
	require.NotZero(t, ab.Len(), "the FPDU went to the stream")

	// Reading: the stream's bytes, framed; the socket is not read.
	ba.Write(ab.Bytes())
	_, err = unix.Write(afd, []byte("doorbell"))
	require.NoError(t, err)
	_, err = q.Fill()
	require.NoError(t, err)
	seg, err := q.NextSegment()
	require.NoError(t, err)
	require.Equal(t, "hello over the stream", string(seg.Payload))
	seg.Release()
	_, err = q.Fill()
	require.ErrorIs(t, err, unix.EAGAIN)
	require.True(t, q.Drained(), "now the stream was found empty")
	n, _, err = unix.Recvfrom(cfd, got, unix.MSG_DONTWAIT|unix.MSG_PEEK)
	require.NoError(t, err)
	require.Equal(t, "doorbell", string(got[:n]), "the socket is the stream's to drain, not the QP's")
}
