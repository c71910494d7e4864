package iwarp

import (
	"encoding/binary"
	"fmt"
)

// RDMAP (RFC 5040 §4, RFC 7306 §4). The RDMAP control octet is the first
// octet of DDP's RsvdULP:
//
//	RV (2 bits, 0xC0) = 01 | reserved (0x30) = 0 | opcode (0x0F)
const (
	RDMAPVersion      = 1
	RDMAPVersionMask  = 0xC0
	RDMAPReservedMask = 0x30
	RDMAPOpcodeMask   = 0x0F
)

// Opcode is an RDMAP opcode.
type Opcode uint8

const (
	OpRDMAWrite        Opcode = 0x0
	OpReadRequest      Opcode = 0x1
	OpReadResponse     Opcode = 0x2
	OpSend             Opcode = 0x3
	OpSendInvalidate   Opcode = 0x4
	OpSendSE           Opcode = 0x5
	OpSendSEInvalidate Opcode = 0x6
	OpTerminate        Opcode = 0x7
	OpImmediate        Opcode = 0x8 // RFC 7306 Immediate Data
	OpImmediateSE      Opcode = 0x9 // RFC 7306 Immediate Data with Solicited Event
)

// Untagged queue numbers (RFC 5040 §3.1).
const (
	QNSend        = 0 // Send family and Immediate Data
	QNReadRequest = 1
	QNTerminate   = 2
)

// ImmediateDataLen is the payload of an Immediate Data message (RFC 7306).
const ImmediateDataLen = 8

// RDMAPCtrl returns the RDMAP control octet for op: RV=1, reserved 0.
func RDMAPCtrl(op Opcode) uint8 { return RDMAPVersion<<6 | uint8(op)&RDMAPOpcodeMask }

// OpInfo is what RFC 5040 / RFC 7306 fix for an opcode.
type OpInfo struct {
	Name   string
	Tagged bool   // carried in tagged DDP segments
	QN     uint32 // untagged queue, when not Tagged
	// Invalidate: the untagged header's RsvdULP carries an Invalidate STag.
	Invalidate bool
	// Solicited: the message asks for a Solicited Event at the receiver.
	Solicited bool
	// Payload is the exact payload of a single-segment message, or -1 when
	// the message may be of any size and span several segments.
	Payload int
	// MinPayload is the least payload of a single-segment message of
	// variable size (Terminate: its control word).
	MinPayload int
}

var opTable = [...]OpInfo{
	OpRDMAWrite:        {Name: "RDMAWrite", Tagged: true, Payload: -1},
	OpReadRequest:      {Name: "ReadRequest", QN: QNReadRequest, Payload: ReadRequestHeaderLen},
	OpReadResponse:     {Name: "ReadResponse", Tagged: true, Payload: -1},
	OpSend:             {Name: "Send", QN: QNSend, Payload: -1},
	OpSendInvalidate:   {Name: "SendInvalidate", QN: QNSend, Invalidate: true, Payload: -1},
	OpSendSE:           {Name: "SendSE", QN: QNSend, Solicited: true, Payload: -1},
	OpSendSEInvalidate: {Name: "SendSEInvalidate", QN: QNSend, Invalidate: true, Solicited: true, Payload: -1},
	OpTerminate:        {Name: "Terminate", QN: QNTerminate, Payload: -1, MinPayload: TerminateHeaderLen},
	OpImmediate:        {Name: "Immediate", QN: QNSend, Payload: ImmediateDataLen},
	OpImmediateSE:      {Name: "ImmediateSE", QN: QNSend, Solicited: true, Payload: ImmediateDataLen},
}

// Info returns the opcode's properties; ok is false for opcodes this
// package does not carry (RFC 7306 atomics, reserved values).
func (op Opcode) Info() (info OpInfo, ok bool) {
	if int(op) < len(opTable) {
		return opTable[op], true
	}
	return OpInfo{}, false
}

// Tagged reports whether op travels in tagged DDP segments.
func (op Opcode) Tagged() bool { info, _ := op.Info(); return info.Tagged }

func (op Opcode) String() string {
	if info, ok := op.Info(); ok {
		return info.Name
	}
	switch op {
	case 0xA:
		return "AtomicRequest"
	case 0xB:
		return "AtomicResponse"
	}
	return fmt.Sprintf("Opcode(%#x)", uint8(op))
}

// Read Request header (RFC 5040 §4.4), the payload of an untagged segment
// on QN 1:
//
//	SinkSTag (4) | SinkTO (8) | RDMARDSZ (4) | SrcSTag (4) | SrcTO (8)
const ReadRequestHeaderLen = 28

// ReadRequestHeader is a view of a Read Request header.
type ReadRequestHeader []byte

func (h ReadRequestHeader) SinkSTag() uint32 { return binary.BigEndian.Uint32(h[0:4]) }
func (h ReadRequestHeader) SinkTO() uint64   { return binary.BigEndian.Uint64(h[4:12]) }
func (h ReadRequestHeader) RDMARDSZ() uint32 { return binary.BigEndian.Uint32(h[12:16]) }
func (h ReadRequestHeader) SrcSTag() uint32  { return binary.BigEndian.Uint32(h[16:20]) }
func (h ReadRequestHeader) SrcTO() uint64    { return binary.BigEndian.Uint64(h[20:28]) }

// ReadRequest is a decoded Read Request header. The data moves from the
// requester's sink buffer's point of view: the responder reads Size octets
// at SrcSTag/SrcTO and writes them to SinkSTag/SinkTO with Read Responses.
type ReadRequest struct {
	SinkSTag uint32
	SinkTO   uint64
	Size     uint32 // RDMARDSZ
	SrcSTag  uint32
	SrcTO    uint64
}

// EncodeReadRequest writes r into b[0:28].
func EncodeReadRequest(b []byte, r *ReadRequest) {
	_ = b[ReadRequestHeaderLen-1]
	binary.BigEndian.PutUint32(b[0:4], r.SinkSTag)
	binary.BigEndian.PutUint64(b[4:12], r.SinkTO)
	binary.BigEndian.PutUint32(b[12:16], r.Size)
	binary.BigEndian.PutUint32(b[16:20], r.SrcSTag)
	binary.BigEndian.PutUint64(b[20:28], r.SrcTO)
}

// ParseReadRequest decodes the payload of a Read Request segment.
func ParseReadRequest(payload []byte) (ReadRequest, error) {
	if len(payload) != ReadRequestHeaderLen {
		return ReadRequest{}, rdmapErr(RDMAPErrTypeOperation, RDMAPErrUnspecified,
			"Read Request header of %d octets, want %d", len(payload), ReadRequestHeaderLen)
	}
	h := ReadRequestHeader(payload)
	return ReadRequest{SinkSTag: h.SinkSTag(), SinkTO: h.SinkTO(), Size: h.RDMARDSZ(), SrcSTag: h.SrcSTag(), SrcTO: h.SrcTO()}, nil
}
