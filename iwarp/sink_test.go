package iwarp

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// holdStream is pipeStream that can say what it holds, take records,
// and lie: short makes Holds say yes to what is not there.
type holdStream struct {
	pipeStream
	most   int           // octets that arrive per read, if not 0
	more   *bytes.Buffer // what has not arrived yet
	short  bool
	room   int // AppendRecord's room, in octets (<0: any)
	staged []byte
	pushes int
}

func (s *holdStream) Holds(n int) bool { return s.short || s.in.Len() >= n }

// Read takes what has arrived: with most set, each read first lets most
// more octets of later (held back in more) arrive, as a ring fills while
// its reader reads.
func (s *holdStream) Read(b []byte) (int, error) {
	if s.most > 0 {
		if s.more == nil {
			s.more = bytes.NewBuffer(s.in.Next(s.in.Len()))
		}
		s.in.Write(s.more.Next(s.most))
	}
	return s.pipeStream.Read(b)
}

func (s *holdStream) AppendRecord(parts ...[]byte) (bool, error) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if s.room >= 0 && n > s.room {
		return false, nil
	}
	if s.room >= 0 {
		s.room -= n
	}
	for _, p := range parts {
		s.staged = append(s.staged, p...)
	}
	return true, nil
}

func (s *holdStream) Push() {
	s.out.Write(s.staged)
	s.staged = s.staged[:0]
	s.pushes++
}

// streamQP is a QP in Full Operation over s, without markers and CRC. Its
// socket is one end of a Unix pair: over a stream the QP does not read it.
func streamQP(t testing.TB, s ByteStream) *QP {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	q := NewQP(fds[0])
	q.UseStream(s)
	q.StartFullOperation(false, false, false, 512, 64<<10)
	return q
}

// TestPostDirectSameOctets: a large message framed straight into a
// stream's records (AppendRecord) is the same octets as the message
// framed into the transmit buffer and flushed, whether all of it fits the
// ring or only its first FPDUs do; small messages and what follows a
// message left in the buffer keep the buffer.
func TestPostDirectSameOctets(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	msgs := [][]byte{make([]byte, 100), make([]byte, 200<<10), make([]byte, 70000), make([]byte, 5000)}
	for _, m := range msgs {
		rng.Read(m)
	}
	frame := func(s ByteStream) []byte {
		q := streamQP(t, s)
		for _, m := range msgs {
			q.PostSend(OpSend, m[:16], m[16:])
			require.NoError(t, q.Flush())
		}
		return nil
	}
	plain := &pipeStream{in: new(bytes.Buffer), out: new(bytes.Buffer)}
	frame(plain)
	for _, room := range []int{-1, 100 << 10, 0} {
		ps := &holdStream{pipeStream: pipeStream{in: new(bytes.Buffer), out: new(bytes.Buffer)}, room: room}
		frame(ps)
		require.True(t, bytes.Equal(plain.out.Bytes(), ps.out.Bytes()), "room %d: the octets differ", room)
		if room != 0 {
			require.NotZero(t, ps.pushes, "room %d: nothing went straight to the stream", room)
		}
	}
}

// TestSinkSends: the payload of large Sends goes where the sink says, the
// ULP's header of each message stays a segment of its own from the
// chunk, and every segment has the MSN, MO and Last it had on the wire;
// small Sends and a sink that declines take the chunk.
func TestSinkSends(t *testing.T) {
	rng := rand.New(rand.NewSource(10))
	sizes := []int{70000, 300, 20000, 9000}
	var msgs [][]byte
	for _, n := range sizes {
		m := make([]byte, n)
		rng.Read(m)
		msgs = append(msgs, m)
	}
	tx := &pipeStream{in: new(bytes.Buffer), out: new(bytes.Buffer)}
	qs := streamQP(t, tx)
	for _, m := range msgs {
		qs.PostSend(OpSend, m)
	}
	require.NoError(t, qs.Flush())

	rx := &holdStream{pipeStream: pipeStream{in: tx.out, out: new(bytes.Buffer)}, most: 50000}
	q := streamQP(t, rx)
	sink := make([]byte, 1<<20)
	used, asked := 0, 0
	q.SinkSends(func(head []byte, n int) []byte {
		asked++
		if len(msgs[2]) == 20000 && head != nil && bytes.Equal(head, msgs[2][:16]) {
			return nil // declined: the chunk takes it
		}
		b := sink[used : used+n : used+n]
		used += n
		return b
	}, 16)
	var got [][]byte
	var cur []byte
	for i := 0; i < 10000 && len(got) < len(msgs); i++ {
		seg, err := q.NextSegment()
		if err == ErrNeedMore {
			_, err = q.Fill()
			if err != unix.EAGAIN {
				require.NoError(t, err)
			}
			continue
		}
		require.NoError(t, err)
		require.EqualValues(t, len(got)+1, seg.MSN, "MSNs start at 1")
		require.EqualValues(t, len(cur), seg.MO)
		cur = append(cur, seg.Payload...)
		require.Equal(t, seg.Sunk(), overlaps(seg.Payload, sink), "Sunk says where the payload lies")
		seg.Release()
		if seg.Last {
			got = append(got, cur)
			cur = nil
		}
	}
	require.Len(t, got, len(msgs))
	for i := range msgs {
		require.True(t, bytes.Equal(msgs[i], got[i]), "message %d", i)
	}
	require.NotZero(t, q.SinkPlaced())
	require.Less(t, q.SinkPlaced(), uint64(70000+20000+9000), "the declined and the small ones took the chunk")
	require.NotZero(t, asked)
}

// TestSinkStreamShort: a stream that said it held a whole FPDU and then
// gives less is the peer's fault (a ring it broke): the QP faults, and
// nothing panics.
func TestSinkStreamShort(t *testing.T) {
	tx := &pipeStream{in: new(bytes.Buffer), out: new(bytes.Buffer)}
	qs := streamQP(t, tx)
	qs.PostSend(OpSend, make([]byte, 30000))
	require.NoError(t, qs.Flush())
	wire := tx.out.Bytes()
	cut := bytes.NewBuffer(append([]byte(nil), wire[:len(wire)/2]...))
	rx := &holdStream{pipeStream: pipeStream{in: cut, out: new(bytes.Buffer)}, short: true}
	q := streamQP(t, rx)
	sink := make([]byte, 64<<10)
	q.SinkSends(func(head []byte, n int) []byte { return sink[:n:n] }, 16)
	var err error
	for i := 0; i < 100; i++ {
		if _, err = q.NextSegment(); err != ErrNeedMore {
			break
		}
		if _, ferr := q.Fill(); ferr != nil && ferr != unix.EAGAIN {
			err = ferr // the fault, as Fill meets it
			break
		}
	}
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, uint8(DDPErrCatastrophic), e.Code)
}

// FuzzSink: whatever a peer writes into the stream, a QP reading it with
// a sink neither panics nor writes outside what the sink handed out, and
// every segment it returns from the sink lies inside the sink. The seeds
// are well-formed large Sends, so mutations reach the sink's own reads.
func FuzzSink(f *testing.F) {
	tx := &pipeStream{in: new(bytes.Buffer), out: new(bytes.Buffer)}
	qs := streamQP(f, tx)
	qs.PostSend(OpSend, make([]byte, 9000))
	qs.PostSend(OpSend, make([]byte, 70000))
	if err := qs.Flush(); err != nil {
		f.Fatal(err)
	}
	f.Add(tx.out.Bytes(), uint16(0), false)
	f.Add(tx.out.Bytes()[:5000], uint16(100), true)
	f.Fuzz(func(t *testing.T, wire []byte, cut uint16, short bool) {
		in := bytes.NewBuffer(append([]byte(nil), wire...))
		rx := &holdStream{pipeStream: pipeStream{in: in, out: new(bytes.Buffer)}, short: short}
		q := streamQP(t, rx)
		sink := make([]byte, 128<<10)
		guard := sink[len(sink)-1024:]
		sink = sink[:len(sink)-1024]
		used := 0
		q.SinkSends(func(head []byte, n int) []byte {
			if int(cut)%7 == 6 || used+n > len(sink) {
				return nil
			}
			b := sink[used : used+n : used+n]
			used += n
			return b
		}, int(cut)%40)
		for i := 0; i < 1000; i++ {
			seg, err := q.NextSegment()
			if err == ErrNeedMore {
				if _, err := q.Fill(); err != nil {
					break
				}
				continue
			}
			if err != nil {
				break
			}
			if seg.Sunk() && !overlaps(seg.Payload, sink) {
				t.Fatalf("a sunk segment of %d octets outside the sink", len(seg.Payload))
			}
			seg.Release()
		}
		for _, b := range guard {
			if b != 0 {
				t.Fatal("written past the sink")
			}
		}
	})
}
