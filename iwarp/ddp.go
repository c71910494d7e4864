package iwarp

import "encoding/binary"

// DDP segment headers (RFC 5041 §4). A ULPDU starts with one of them.
//
//	untagged (18): ctrl | RsvdULP (5) | QN (4) | MSN (4) | MO (4)
//	tagged   (14): ctrl | RsvdULP (1) | STag (4) | TO (8)
//
// RDMAP owns RsvdULP: its first octet is the RDMAP control octet, and in
// untagged segments the next four carry the Invalidate STag (RFC 5040 §4.1).
const (
	DDPUntaggedHeaderLen = 18
	DDPTaggedHeaderLen   = 14

	DDPFlagTagged   = 0x80 // T
	DDPFlagLast     = 0x40 // L
	DDPReservedMask = 0x3C
	DDPVersionMask  = 0x03
	DDPVersion      = 1
)

// DDPHeader is a view of a DDP header. Accessors read the fields of either
// kind; the caller picks them by Tagged.
type DDPHeader []byte

func (h DDPHeader) Tagged() bool        { return h[0]&DDPFlagTagged != 0 }
func (h DDPHeader) Last() bool          { return h[0]&DDPFlagLast != 0 }
func (h DDPHeader) Reserved() uint8     { return h[0] & DDPReservedMask }
func (h DDPHeader) DV() uint8           { return h[0] & DDPVersionMask }
func (h DDPHeader) RDMAPControl() uint8 { return h[1] }
func (h DDPHeader) Opcode() Opcode      { return Opcode(h[1] & RDMAPOpcodeMask) }

// RsvdULP32 is untagged RsvdULP[8:39], the Invalidate STag of RDMAP.
func (h DDPHeader) RsvdULP32() uint32 { return binary.BigEndian.Uint32(h[2:6]) }
func (h DDPHeader) QN() uint32        { return binary.BigEndian.Uint32(h[6:10]) }
func (h DDPHeader) MSN() uint32       { return binary.BigEndian.Uint32(h[10:14]) }
func (h DDPHeader) MO() uint32        { return binary.BigEndian.Uint32(h[14:18]) }
func (h DDPHeader) STag() uint32      { return binary.BigEndian.Uint32(h[2:6]) }
func (h DDPHeader) TO() uint64        { return binary.BigEndian.Uint64(h[6:14]) }

// Len is the header's length as its T bit says.
func (h DDPHeader) Len() int {
	if h.Tagged() {
		return DDPTaggedHeaderLen
	}
	return DDPUntaggedHeaderLen
}

// DDPSegment is a parsed DDP segment with its RDMAP control octet.
type DDPSegment struct {
	Tagged, Last bool
	// RDMAPCtrl is the whole RDMAP control octet: RV (0xC0, must be 01),
	// reserved (0x30, 0) and the opcode (0x0F).
	RDMAPCtrl      uint8
	InvalidateSTag uint32 // untagged RsvdULP[8:39]
	QN, MSN, MO    uint32 // untagged
	STag           uint32 // tagged
	TO             uint64 // tagged
	Payload        []byte // aliases the ULPDU
}

// Opcode is the RDMAP opcode of the segment.
func (s *DDPSegment) Opcode() Opcode { return Opcode(s.RDMAPCtrl & RDMAPOpcodeMask) }

// HeaderLen is the DDP header length of the segment.
func (s *DDPSegment) HeaderLen() int {
	if s.Tagged {
		return DDPTaggedHeaderLen
	}
	return DDPUntaggedHeaderLen
}

// AppendHeader appends the segment's DDP header.
func (s *DDPSegment) AppendHeader(dst []byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, s.HeaderLen())...)
	if s.Tagged {
		EncodeTaggedHeader(dst[n:], s.Last, s.RDMAPCtrl, s.STag, s.TO)
	} else {
		EncodeUntaggedHeader(dst[n:], s.Last, s.RDMAPCtrl, s.InvalidateSTag, s.QN, s.MSN, s.MO)
	}
	return dst
}

func ddpCtrl(tagged, last bool) uint8 {
	c := uint8(DDPVersion)
	if tagged {
		c |= DDPFlagTagged
	}
	if last {
		c |= DDPFlagLast
	}
	return c
}

// EncodeUntaggedHeader writes an untagged DDP header into b[0:18].
func EncodeUntaggedHeader(b []byte, last bool, rdmapCtrl uint8, invSTag, qn, msn, mo uint32) {
	_ = b[DDPUntaggedHeaderLen-1]
	b[0] = ddpCtrl(false, last)
	b[1] = rdmapCtrl
	binary.BigEndian.PutUint32(b[2:6], invSTag)
	binary.BigEndian.PutUint32(b[6:10], qn)
	binary.BigEndian.PutUint32(b[10:14], msn)
	binary.BigEndian.PutUint32(b[14:18], mo)
}

// EncodeTaggedHeader writes a tagged DDP header into b[0:14].
func EncodeTaggedHeader(b []byte, last bool, rdmapCtrl uint8, stag uint32, to uint64) {
	_ = b[DDPTaggedHeaderLen-1]
	b[0] = ddpCtrl(true, last)
	b[1] = rdmapCtrl
	binary.BigEndian.PutUint32(b[2:6], stag)
	binary.BigEndian.PutUint64(b[6:14], to)
}

// ParseDDPSegment parses the DDP and RDMAP headers at the start of a ULPDU
// and checks what can be checked without connection state:
//
//   - the ULPDU holds a whole header of the kind its T bit names;
//   - DV is 1 and the reserved bits are 0 (a nonzero reserved bit is
//     reported as an invalid DDP version: the header is not one this
//     version defines);
//   - RDMAP's RV is 1 and its reserved bits are 0;
//   - the opcode is known, tagged exactly when RDMAP says it is, and an
//     untagged one arrives on its own queue;
//   - single-segment messages (Read Request, Terminate, Immediate Data)
//     have L=1, MO=0 and the payload size their RFC gives.
//
// MSN, MO sequencing and STag checks need state and belong to the caller.
// Payload aliases ulpdu.
func ParseDDPSegment(ulpdu []byte) (DDPSegment, error) {
	var s DDPSegment
	err := parseDDPSegment(&s, ulpdu)
	return s, err
}

// parseDDPSegment is ParseDDPSegment into *s, which it overwrites whole:
// the receive path's segment is filled in place (NextSegmentTo).
func parseDDPSegment(s *DDPSegment, ulpdu []byte) error {
	*s = DDPSegment{}
	if len(ulpdu) < 2 {
		return ddpErr(DDPErrTypeCatastrophic, DDPErrCatastrophic, "ULPDU of %d octets is too short for a DDP header", len(ulpdu))
	}
	h := DDPHeader(ulpdu)
	s.Tagged = h.Tagged()
	hl := h.Len()
	kind := "untagged"
	if s.Tagged {
		kind = "tagged"
	}
	if len(ulpdu) < hl {
		return ddpErr(DDPErrTypeCatastrophic, DDPErrCatastrophic, "%s segment of %d octets is shorter than its %d-octet header", kind, len(ulpdu), hl)
	}
	if dv := h.DV(); dv != DDPVersion {
		return ddpVersionErr(s.Tagged, "%s segment has DDP version %d, want %d", kind, dv, DDPVersion)
	}
	if r := h.Reserved(); r != 0 {
		return ddpVersionErr(s.Tagged, "%s segment has reserved control bits %#02x set (control octet %#02x)", kind, r, ulpdu[0])
	}
	s.Last = h.Last()
	s.RDMAPCtrl = h.RDMAPControl()
	if rv := (s.RDMAPCtrl & RDMAPVersionMask) >> 6; rv != RDMAPVersion {
		return rdmapErr(RDMAPErrTypeOperation, RDMAPErrVersion, "RDMAP version %d, want %d (control octet %#02x)", rv, RDMAPVersion, s.RDMAPCtrl)
	}
	if r := s.RDMAPCtrl & RDMAPReservedMask; r != 0 {
		return rdmapErr(RDMAPErrTypeOperation, RDMAPErrVersion, "RDMAP reserved control bits %#02x set (control octet %#02x)", r, s.RDMAPCtrl)
	}
	op := s.Opcode()
	info, ok := op.Info()
	if !ok {
		return rdmapErr(RDMAPErrTypeOperation, RDMAPErrOpcode, "unknown opcode %#x", uint8(op))
	}
	if info.Tagged != s.Tagged {
		return rdmapErr(RDMAPErrTypeOperation, RDMAPErrOpcode, "%v in a %s DDP segment", op, kind)
	}
	s.Payload = ulpdu[hl:]
	if s.Tagged {
		s.STag = h.STag()
		s.TO = h.TO()
		return nil
	}
	s.InvalidateSTag = h.RsvdULP32()
	s.QN, s.MSN, s.MO = h.QN(), h.MSN(), h.MO()
	if s.QN != info.QN {
		return ddpErr(DDPErrTypeUntagged, DDPErrInvalidQN, "%v on QN %d, want QN %d", op, s.QN, info.QN)
	}
	if info.Payload >= 0 || info.MinPayload > 0 {
		if !s.Last {
			return ddpErr(DDPErrTypeUntagged, DDPErrTooLong, "%v spans more than one segment (L=0)", op)
		}
		if s.MO != 0 {
			return ddpErr(DDPErrTypeUntagged, DDPErrInvalidMO, "%v has MO %d, want 0", op, s.MO)
		}
		if info.Payload >= 0 && len(s.Payload) != info.Payload {
			return rdmapErr(RDMAPErrTypeOperation, RDMAPErrUnspecified, "%v carries %d octets, want %d", op, len(s.Payload), info.Payload)
		}
		if len(s.Payload) < info.MinPayload {
			return rdmapErr(RDMAPErrTypeOperation, RDMAPErrUnspecified, "%v carries %d octets, want at least %d", op, len(s.Payload), info.MinPayload)
		}
	}
	return nil
}

// ddpVersionErr is an invalid DDP version, which RFC 5041 §7.2 numbers
// differently for a tagged and an untagged segment.
func ddpVersionErr(tagged bool, format string, args ...any) *Error {
	if tagged {
		return ddpErr(DDPErrTypeTagged, DDPErrTaggedVersion, format, args...)
	}
	return ddpErr(DDPErrTypeUntagged, DDPErrUntaggedVersion, format, args...)
}
