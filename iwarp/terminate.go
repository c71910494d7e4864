package iwarp

import (
	"encoding/binary"
	"fmt"
)

// Terminate (RFC 5040 §4.8, §5.4): an untagged message on QN 2, single
// segment, whose payload is
//
//	Terminate Control (4): Layer (4) | EType (4) | ErrCode (8) | M | D | R | reserved (13)
//	[if D] DDP Segment Length (2) | terminated DDP header (14 or 18)
//	[if R] terminated RDMA header (28, a Read Request header)
//
// M says the DDP Segment Length is valid, D that the DDP header is
// included, R that the RDMA header is. Linux siw lays it out the same way.
const (
	TerminateHeaderLen = 4

	termFlagM = 0x8000
	termFlagD = 0x4000
	termFlagR = 0x2000
	termRsvd  = 0x1FFF
)

// TerminateCtrl is the Terminate Control word.
type TerminateCtrl struct {
	Layer   Layer
	EType   uint8 // 4 bits
	Code    uint8
	M, D, R bool
}

// TerminateHeader is a view of the Terminate Control word.
type TerminateHeader []byte

func (h TerminateHeader) word() uint32     { return binary.BigEndian.Uint32(h[0:4]) }
func (h TerminateHeader) Layer() Layer     { return Layer(h[0] >> 4) }
func (h TerminateHeader) EType() uint8     { return h[0] & 0x0F }
func (h TerminateHeader) Code() uint8      { return h[1] }
func (h TerminateHeader) M() bool          { return h.word()&termFlagM != 0 }
func (h TerminateHeader) D() bool          { return h.word()&termFlagD != 0 }
func (h TerminateHeader) R() bool          { return h.word()&termFlagR != 0 }
func (h TerminateHeader) Reserved() uint16 { return uint16(h.word() & termRsvd) }

// Ctrl decodes the control word.
func (h TerminateHeader) Ctrl() TerminateCtrl {
	return TerminateCtrl{Layer: h.Layer(), EType: h.EType(), Code: h.Code(), M: h.M(), D: h.D(), R: h.R()}
}

// EncodeTerminate writes the control word c into b[0:4].
func EncodeTerminate(b []byte, c TerminateCtrl) {
	w := uint32(c.Layer&0x0F)<<28 | uint32(c.EType&0x0F)<<24 | uint32(c.Code)<<16
	if c.M {
		w |= termFlagM
	}
	if c.D {
		w |= termFlagD
	}
	if c.R {
		w |= termFlagR
	}
	binary.BigEndian.PutUint32(b[0:4], w)
}

// TerminateFor classifies err for a Terminate message. A nil err is a local
// catastrophic RDMAP error, unspecified (what Linux siw sends when a QP is
// torn down). No header is attached: callers that hold the offending
// segment's headers send them with a Terminate and AppendTerminate.
func TerminateFor(err *Error) TerminateCtrl {
	if err == nil {
		return TerminateCtrl{Layer: LayerRDMAP, EType: RDMAPErrTypeCatastrophic, Code: RDMAPErrUnspecified}
	}
	return TerminateCtrl{Layer: err.Layer, EType: err.Type & 0x0F, Code: err.Code}
}

// Err turns a received control word into an *Error describing the peer's
// complaint.
func (c TerminateCtrl) Err() *Error {
	return &Error{Layer: c.Layer, Type: c.EType, Code: c.Code,
		Msg: "peer terminated the stream: " + codeName(c.Layer, c.EType, c.Code)}
}

// Terminate is a whole Terminate payload.
type Terminate struct {
	TerminateCtrl
	SegLen     uint16 // DDP Segment Length, meaningful when M
	DDPHeader  []byte // terminated DDP header, present when D
	RDMAHeader []byte // terminated RDMA header, present when R
}

// AppendTerminate appends t's payload. D and R follow from whether
// DDPHeader and RDMAHeader are set, whatever t.D and t.R say.
func AppendTerminate(dst []byte, t *Terminate) []byte {
	c := t.TerminateCtrl
	c.D = len(t.DDPHeader) > 0
	c.R = len(t.RDMAHeader) > 0
	n := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	EncodeTerminate(dst[n:], c)
	if c.D {
		dst = binary.BigEndian.AppendUint16(dst, t.SegLen)
		dst = append(dst, t.DDPHeader...)
	}
	return append(dst, t.RDMAHeader...)
}

// ParseTerminate decodes a Terminate payload. The slices alias payload.
func ParseTerminate(payload []byte) (Terminate, error) {
	var t Terminate
	if len(payload) < TerminateHeaderLen {
		return t, termErr("Terminate payload of %d octets, want at least %d", len(payload), TerminateHeaderLen)
	}
	t.TerminateCtrl = TerminateHeader(payload).Ctrl()
	rest := payload[TerminateHeaderLen:]
	if t.D {
		if len(rest) < 3 {
			return t, termErr("Terminate with D set ends after %d octets", len(payload))
		}
		t.SegLen = binary.BigEndian.Uint16(rest)
		hl := DDPHeader(rest[2:]).Len()
		if len(rest) < 2+hl {
			return t, termErr("Terminate's DDP header is %d octets, want %d", len(rest)-2, hl)
		}
		t.DDPHeader = rest[2 : 2+hl]
		rest = rest[2+hl:]
	}
	if t.R {
		if len(rest) < ReadRequestHeaderLen {
			return t, termErr("Terminate's RDMA header is %d octets, want %d", len(rest), ReadRequestHeaderLen)
		}
		t.RDMAHeader = rest[:ReadRequestHeaderLen]
	}
	return t, nil
}

func termErr(format string, args ...any) *Error {
	return rdmapErr(RDMAPErrTypeOperation, RDMAPErrUnspecified, format, args...)
}

func (c TerminateCtrl) String() string {
	return fmt.Sprintf("Terminate{%v type %d code %#x M:%t D:%t R:%t}", c.Layer, c.EType, c.Code, c.M, c.D, c.R)
}
