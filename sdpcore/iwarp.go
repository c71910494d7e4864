package sdpcore

import (
	"errors"
	"fmt"
	"time"

	"libsdp/iwarp"
)

// SDP over iWARP: connections built over an iwarp QP on the connection's
// TCP socket, and the Transport that QP is to a Conn. Tests aside, this is
// the only file of the package that imports iwarp.

// NewActive starts the connecting side on a socket whose TCP connection to
// the SDP port is established.
func NewActive(fd int, cfg Config, now time.Time) *Conn {
	return NewActiveStream(fd, cfg, now, nil)
}

// NewActiveStream is NewActive with the messages over s (samehost.go);
// nil: over the socket.
func NewActiveStream(fd int, cfg Config, now time.Time, s iwarp.ByteStream) *Conn {
	cfg.Sanitize()
	return newActive(newQPTransport(fd, &cfg, s, nil), cfg, now)
}

// NewPassive starts the accepting side of a connection whose MPA Request
// (with our Hello) has already been written to the socket.
func NewPassive(fd int, cfg Config, request []byte) (*Conn, error) {
	return NewPassiveStream(fd, cfg, request, nil)
}

// NewPassiveStream is NewPassive with the messages over s (samehost.go);
// nil: over the socket.
func NewPassiveStream(fd int, cfg Config, request []byte, s iwarp.ByteStream) (*Conn, error) {
	cfg.Sanitize()
	req, n, err := iwarp.ParseMPAFrame(request, false)
	if err != nil || n != len(request) {
		return nil, fmt.Errorf("sdp: our own MPA Request does not parse: %v", err)
	}
	h, err := ParseHello(req.PrivateData)
	if err != nil {
		return nil, err
	}
	return newPassive(newQPTransport(fd, &cfg, s, &h), cfg, h, SetupMsg{Markers: req.Markers, CRC: req.CRC})
}

// AppendRequest appends the MPA Request with our Hello that the accepting
// side sends first. The shim writes the same bytes from C; this is the
// reference encoder.
func AppendRequest(dst []byte, cfg Config, h *Hello) []byte {
	hc := *h
	if cfg.ZCopyThreshold > 0 {
		hc.Cap |= CapWriteZCopy // as the shim's Hello
	}
	markers, crc := cfg.Markers, cfg.CRC
	if cfg.SameHost {
		hc.Cap |= CapSameHost // as the shim's Hello
		if h.Local() {
			// No network between the two ends, nothing for markers
			// and CRC to guard against: both off (docs/PROTOCOL.md).
			markers, crc = false, false
		}
	}
	pd := AppendHello(nil, &hc)
	return iwarp.AppendMPAFrame(dst, &iwarp.MPAFrame{Markers: markers, CRC: crc, Rev: 1, PrivateData: pd})
}

// qpTransport is an iwarp QP seen as a Transport. It is the QP itself (a
// pointer conversion, no wrapper to allocate), and its methods only
// convert between iwarp's values and the package's.
type qpTransport iwarp.QP

var _ Transport = (*qpTransport)(nil)

// newQPTransport makes the QP of a connection on fd; own is the accepting
// side's Hello (nil on the connecting side), whose addresses say whether
// the peer is on this host without asking the kernel again.
func newQPTransport(fd int, cfg *Config, s iwarp.ByteStream, own *Hello) *qpTransport {
	q := iwarp.NewQP(fd)
	if s != nil {
		q.UseStream(s)
	}
	if own != nil && own.SrcIP != [16]byte{} {
		q.SetPeerLocal(own.Local())
	}
	// Alignment (RFC 5044 §5) lets a receiving NIC find FPDUs in every
	// segment; within the host no NIC sees them, and on loopback it costs a
	// buffer per FPDU through both TCP stacks: half the bulk bandwidth of
	// letting the kernel merge them (docs/PERFORMANCE.md).
	q.SetAlign(!cfg.Unaligned && (cfg.AlignLocal || !q.PeerLocal()))
	return (*qpTransport)(q)
}

func (t *qpTransport) qp() *iwarp.QP { return (*iwarp.QP)(t) }

// RoomEvent is the socket event that says queued bytes may go again: the
// socket's room, or, over a stream in shared memory, the doorbell the
// peer rings on the socket when it frees ring space.
func (t *qpTransport) RoomEvent() Events {
	if (t.qp().Stream() != nil || t.qp().Choosing()) && t.qp().Full() {
		return EvIn
	}
	return EvOut
}

// Setup: MPA Request and Reply.

func (t *qpTransport) PeerSetup(reply bool) (SetupMsg, int, error) {
	f, n, err := iwarp.ParseMPAFrame(t.qp().Raw(), reply)
	if err == iwarp.ErrNeedMore {
		err = ErrIncomplete
	}
	return SetupMsg{Reject: f.Reject, Markers: f.Markers, CRC: f.CRC, PrivateData: f.PrivateData}, n, err
}

func (t *qpTransport) ConsumeSetup(n int) { t.qp().ConsumeRaw(n) }

func (t *qpTransport) SendSetupReply(m SetupMsg) {
	f := &iwarp.MPAFrame{Reply: true, Reject: m.Reject, Markers: m.Markers, CRC: m.CRC, Rev: 1, PrivateData: m.PrivateData}
	t.qp().WriteRaw(iwarp.AppendMPAFrame(nil, f))
}

func (t *qpTransport) StartMessages(txMarkers, rxMarkers, crc bool, markerSpacing, mss int) {
	t.qp().StartFullOperation(txMarkers, rxMarkers, crc, markerSpacing, mss)
}

// Sending.

func (t *qpTransport) PostSend(msg []byte)          { t.qp().PostSend(iwarp.OpSend, msg) }
func (t *qpTransport) PostSendParts(parts [][]byte) { t.qp().PostSend(iwarp.OpSend, parts...) }

func (t *qpTransport) AppendSend(edit func(msg []byte), parts [][]byte) bool {
	return t.qp().AppendSend(edit, parts...)
}

func (t *qpTransport) PostImmediate(data [ImmediateLen]byte) { t.qp().PostImmediate(false, data) }

func (t *qpTransport) PostWrite(stag STag, to uint64, parts [][]byte) {
	t.qp().PostWrite(iwarp.STag(stag), to, parts...)
}

func (t *qpTransport) PostWriteFrom(stag STag, to uint64, src []byte) {
	t.qp().PostWriteGather(iwarp.STag(stag), to, src)
}

func (t *qpTransport) Settle(src []byte) { t.qp().Settle(src) }
func (t *qpTransport) TxCopied() uint64  { return t.qp().TxCopied() }

func (t *qpTransport) PostRead(sink STag, sinkTO uint64, src STag, srcTO uint64, n uint32) (uint64, error) {
	return t.qp().PostReadRequest(iwarp.ReadRequest{SinkSTag: uint32(sink), SinkTO: sinkTO, Size: n, SrcSTag: uint32(src), SrcTO: srcTO})
}

func (t *qpTransport) TxPending() int { return t.qp().TxPending() }
func (t *qpTransport) Flush() error   { return t.qp().Flush() }

// Receiving.

func (t *qpTransport) Fill() error      { return filled(t.qp().Fill()) }
func (t *qpTransport) FillQuiet() error { return filled(t.qp().FillQuiet()) }

// filled is a QP read's error as SDP names it.
func filled(_ int, err error) error {
	if err == iwarp.ErrClosed {
		return ErrPeerClosed
	}
	return err
}

func (t *qpTransport) NextSegment(seg *Segment) error {
	var s iwarp.Segment
	if err := t.qp().NextSegmentTo(&s); err != nil {
		if err == iwarp.ErrNeedMore {
			return ErrIncomplete
		}
		return err
	}
	*seg = Segment{Kind: segmentKind(&s.DDPSegment), Op: uint8(s.Opcode()), Last: s.Last, Offset: s.MO, Payload: s.Payload, Sunk: s.Sunk()}
	if c := s.Chunk(); c != nil {
		seg.Buf = c // the segment's reference, released by Segment.Release
	}
	return nil
}

// segmentKind classifies an untagged segment by its queue and opcode.
func segmentKind(s *iwarp.DDPSegment) SegmentKind {
	switch {
	case s.Tagged:
		return SegTagged
	case s.QN == iwarp.QNTerminate:
		return SegTerminate
	case s.QN != iwarp.QNSend:
		return SegOther
	}
	switch s.Opcode() {
	case iwarp.OpSend, iwarp.OpSendSE:
		return SegSend
	case iwarp.OpImmediate, iwarp.OpImmediateSE:
		return SegImmediate
	}
	return SegOther
}

func (t *qpTransport) RejectSegment(seg Segment) error {
	if seg.Kind == SegTagged {
		return &iwarp.Error{Layer: iwarp.LayerDDP, Type: iwarp.DDPErrTypeTagged, Code: iwarp.DDPErrInvalidSTag, Msg: "DDP: tagged segment but no buffer is registered"}
	}
	// RFC 5040 §4.8: remote operation error, unexpected opcode (0x06).
	return &iwarp.Error{Layer: iwarp.LayerRDMAP, Type: iwarp.RDMAPErrTypeOperation, Code: iwarp.RDMAPErrOpcode, Msg: "RDMAP: unexpected opcode " + iwarp.Opcode(seg.Op).String()}
}

func (t *qpTransport) Buffered() int { return t.qp().Buffered() }

func (t *qpTransport) SinkSends(place func(head []byte, n int) []byte, keep int) {
	t.qp().SinkSends(place, keep)
}
func (t *qpTransport) Sinkable() bool         { return t.qp().Sinkable() }
func (t *qpTransport) LargeNext() (int, bool) { return t.qp().LargeNext() }
func (t *qpTransport) SinkPlaced() uint64     { return t.qp().SinkPlaced() }
func (t *qpTransport) ReadForSink() bool      { return t.qp().ReadForSink() }

func (t *qpTransport) PeerPrompted() bool {
	s := t.shmStream()
	return s != nil && s.Prompted()
}

// PromptPeer marks the ring this side writes (samehost.go); while the
// peer still chooses, the offer marks the stream it takes, before the
// held messages go into it.
func (t *qpTransport) PromptPeer() {
	if s := t.shmStream(); s != nil {
		s.Prompt()
	} else if o, ok := t.qp().Offer().(*sameHostOffer); ok {
		o.prompt()
	}
}
func (t *qpTransport) Drained() bool { return t.qp().Drained() }
func (t *qpTransport) Rest()         { t.qp().Rest() }

func (t *qpTransport) PollCompletions(dst []Completion) []Completion {
	var buf [4]iwarp.Completion // SDP has one Read outstanding at most
	for _, c := range t.qp().PollCompletions(buf[:0]) {
		kind := CompOther
		if c.Kind == iwarp.CompReadDone {
			kind = CompReadDone
		}
		dst = append(dst, Completion{Kind: kind, ID: c.ID})
	}
	return dst
}

// Memory.

func (t *qpTransport) Register(buf []byte, access Access) (STag, error) {
	var a iwarp.Access
	if access&AccessLocalWrite != 0 {
		a |= iwarp.AccessLocalWrite
	}
	if access&AccessRemoteWrite != 0 {
		a |= iwarp.AccessRemoteWrite
	}
	if access&AccessRemoteRead != 0 {
		a |= iwarp.AccessRemoteRead
	}
	s, err := t.qp().Register(buf, a)
	return STag(s), err
}

func (t *qpTransport) Invalidate(s STag)          { t.qp().Invalidate(iwarp.STag(s)) }
func (t *qpTransport) Rebind(s STag, buf []byte)  { t.qp().Rebind(iwarp.STag(s), buf) }
func (t *qpTransport) Detach(s STag) []byte       { return t.qp().Detach(iwarp.STag(s)) }
func (t *qpTransport) WatchWrites(s STag)         { t.qp().WatchWrites(iwarp.STag(s)) }
func (t *qpTransport) Written() int               { return t.qp().Written() }
func (t *qpTransport) SetDirectPlacement(on bool) { t.qp().SetDirectPlacement(on) }
func (t *qpTransport) DirectPlaced() uint64       { return t.qp().DirectPlaced() }
func (t *qpTransport) Fd() int                    { return t.qp().Fd() }
func (t *qpTransport) SetFd(fd int)               { t.qp().SetFd(fd) }
func (t *qpTransport) WireStats() (TxStats, RxStats, uint64) {
	q := t.qp()
	return TxStats(q.TxStats()), RxStats(q.RxStats()), q.TxRecords()
}

// Terminate queues a Terminate for a fault iwarp classified (NextSegment's,
// RejectSegment's), once the QP frames messages.
func (t *qpTransport) Terminate(fault error) bool {
	var ie *iwarp.Error
	if !errors.As(fault, &ie) || !t.qp().Full() {
		return false
	}
	t.qp().PostTerminate(ie)
	return true
}
