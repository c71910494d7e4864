package sdpcore

// Values that pass between SDP and its Transport (transport.go).

// STag names a region registered with the transport: what SDP puts in its
// SrcAvail, SinkAvail and ring announcements for the peer to name back.
type STag uint32

// Access is a set of rights on a registered region.
type Access uint8

// Access rights: local write is what an RDMA Read's sink needs, the remote
// ones what the peer's RDMA Write and Read need.
const (
	AccessLocalWrite Access = 1 << iota
	AccessRemoteWrite
	AccessRemoteRead
)

// ImmediateLen is the size of Immediate Data (RFC 7306): 8 bytes.
const ImmediateLen = 8

// SetupMsg is one side's setup message (transport.go, SetupExchange).
type SetupMsg struct {
	Reject       bool // a reply refusing the connection (the peer went to TCP)
	Markers, CRC bool // the framing its sender asks for
	PrivateData  []byte
}

// SegmentKind is what a received segment is, as SDP handles it.
type SegmentKind uint8

// Segment kinds.
const (
	SegOther     SegmentKind = iota // a message SDP never asks the peer for
	SegSend                         // part of a Send: an SDP message
	SegImmediate                    // Immediate Data: ring data announced (rdma, nic)
	SegTerminate                    // the peer's report of our fault: it ends the connection
	SegTagged                       // tagged data the transport had no region for
)

// Segment is one received piece of a message. Payload lies in the
// transport's receive memory until Release.
type Segment struct {
	Kind    SegmentKind
	Op      uint8  // the transport's own code for the message, for RejectSegment
	Last    bool   // the message's last segment
	Sunk    bool   // Payload lies in the receive sink (sink.go)
	Offset  uint32 // of Payload in its message
	Payload []byte
	Buf     RxBuffer // what Payload lies in; nil once released
}

// RxBuffer is transport memory that received payload lies in: the
// transport reuses it once every segment in it is released.
type RxBuffer interface{ Release() }

// Release gives the segment's memory back to the transport. Call it once.
func (s *Segment) Release() {
	if s.Buf != nil {
		s.Buf.Release()
		s.Buf = nil
	}
}

// CompletionKind says what a Completion reports.
type CompletionKind uint8

// Completion kinds.
const (
	CompOther    CompletionKind = iota // an event SDP does not ask for
	CompReadDone                       // an RDMA Read of ours has all its data in the sink
)

// Completion is one finished operation.
type Completion struct {
	Kind CompletionKind
	ID   uint64 // CompReadDone: the id PostRead returned
}

// TxStats counts what the transport put on the wire.
type TxStats struct {
	FPDUs, Markers uint64
	Bytes          uint64 // wire bytes, framing included
}

// RxStats counts what the transport took off the wire.
type RxStats struct {
	FPDUs, Markers uint64
	Bytes          uint64 // wire bytes of accepted frames, framing included
	CRCBytes       uint64 // bytes run through CRC32C
	CRCErrors      uint64
}
