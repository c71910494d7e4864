package iwarp

import (
	"encoding/binary"
	"fmt"
)

// MPA Request/Reply frames (RFC 5044 §7.1, RFC 6581 §6). All multi-byte
// fields are big-endian.
//
//	 0                16      17     18          20
//	| Key (16 octets) | Flags | Rev | PD_Length | Private Data ... |
const (
	MPAHeaderLen = 20

	// MPAMaxPrivateData is the most private data this package sends or
	// accepts: Linux siw rejects more than 256 (RDMA_MAX_PRIVATE_DATA),
	// although RFC 5044 allows 512.
	MPAMaxPrivateData = 256
	// MPARFCMaxPrivateData is RFC 5044's limit; a larger PD_Length means
	// the peer is not speaking MPA at all.
	MPARFCMaxPrivateData = 512

	// MPARevision is the revision sent when MPAFrame.Rev is 0.
	MPARevision = 1

	mpaKeyLen = 16
)

// Flag bits of octet 16.
const (
	MPAFlagMarkers  = 0x80 // M: the sender of this frame wants markers from its peer
	MPAFlagCRC      = 0x40 // C: CRC wanted (on in both directions if either side sets it)
	MPAFlagReject   = 0x20 // R: Reply only, the connection is rejected
	MPAFlagEnhanced = 0x10 // S: RFC 6581 enhanced connection setup, PD starts with IRD/ORD
)

var (
	mpaKeyReq = [mpaKeyLen]byte{'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'}
	mpaKeyRep = [mpaKeyLen]byte{'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e'}
)

// MPAFrame is a decoded MPA Request or Reply.
type MPAFrame struct {
	Reply    bool // "MPA ID Rep Frame" rather than "MPA ID Req Frame"
	Markers  bool // M flag
	CRC      bool // C flag
	Reject   bool // R flag; only a Reply may carry it
	Enhanced bool // S flag (RFC 6581): PrivateData begins with MPAv2Params
	// Rev is the MPA revision: 1 (RFC 5044) or 2 (RFC 6581). 0 is sent as
	// MPARevision.
	Rev         uint8
	PrivateData []byte
}

// MPAHeader is a view of the 20 fixed octets of a Request/Reply frame.
type MPAHeader []byte

func (h MPAHeader) Key() []byte     { return h[:mpaKeyLen] }
func (h MPAHeader) Flags() uint8    { return h[16] }
func (h MPAHeader) Rev() uint8      { return h[17] }
func (h MPAHeader) PDLength() int   { return int(binary.BigEndian.Uint16(h[18:20])) }
func (h MPAHeader) IsRequest() bool { return [mpaKeyLen]byte(h[:mpaKeyLen]) == mpaKeyReq }
func (h MPAHeader) IsReply() bool   { return [mpaKeyLen]byte(h[:mpaKeyLen]) == mpaKeyRep }

func mpaFlags(f *MPAFrame) uint8 {
	var fl uint8
	if f.Markers {
		fl |= MPAFlagMarkers
	}
	if f.CRC {
		fl |= MPAFlagCRC
	}
	if f.Reject {
		fl |= MPAFlagReject
	}
	if f.Enhanced {
		fl |= MPAFlagEnhanced
	}
	return fl
}

// Validate reports whether f can be sent: a Request must not carry R, Rev
// must be 1 or 2 (or 0 for the default), and the private data must fit in
// MPAMaxPrivateData.
func (f *MPAFrame) Validate() error {
	if !f.Reply && f.Reject {
		return mpaErr(MPAErrReqRep, "an MPA Request cannot carry the R (reject) flag")
	}
	if f.Rev > 2 {
		return mpaErr(MPAErrReqRep, "unsupported MPA revision %d (want 1 or 2)", f.Rev)
	}
	if len(f.PrivateData) > MPAMaxPrivateData {
		return mpaErr(MPAErrReqRep, "%d bytes of private data exceed the limit of %d", len(f.PrivateData), MPAMaxPrivateData)
	}
	return nil
}

// AppendMPAFrame appends f's wire form to dst. It writes what f says; call
// Validate first if f is not known to be valid (a PD over 256 bytes is
// written as is, and peers reject it).
func AppendMPAFrame(dst []byte, f *MPAFrame) []byte {
	key := &mpaKeyReq
	if f.Reply {
		key = &mpaKeyRep
	}
	dst = append(dst, key[:]...)
	rev := f.Rev
	if rev == 0 {
		rev = MPARevision
	}
	dst = append(dst, mpaFlags(f), rev)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(f.PrivateData)))
	return append(dst, f.PrivateData...)
}

// ParseMPAFrame parses the Request (wantReply false) or Reply (wantReply
// true) frame at the start of b. PrivateData aliases b; n is the number of
// octets the frame occupies.
//
// Each octet is judged as soon as it is present, so a peer that is not
// speaking MPA (an SSH or SMTP banner, an HTTP response) is rejected with an
// *Error at its first wrong octet instead of waiting for 20 octets. Only a
// valid prefix yields ErrNeedMore.
func ParseMPAFrame(b []byte, wantReply bool) (f MPAFrame, n int, err error) {
	want, other, kind := &mpaKeyReq, &mpaKeyRep, "Request"
	if wantReply {
		want, other, kind = &mpaKeyRep, &mpaKeyReq, "Reply"
	}
	k := min(len(b), mpaKeyLen)
	for i := 0; i < k; i++ {
		if b[i] == want[i] {
			continue
		}
		if string(b[:k]) == string(other[:k]) {
			return f, 0, mpaErr(MPAErrReqRep, "got an MPA %s frame where a %s was expected", otherKind(wantReply), kind)
		}
		return f, 0, mpaErr(MPAErrReqRep, "not an MPA %s frame: octet %d is %#02x, want %#02x (%q; want %q)",
			kind, i, b[i], want[i], b[:k], want[:])
	}
	if len(b) > 16 {
		fl := b[16]
		f.Reply = wantReply
		f.Markers = fl&MPAFlagMarkers != 0
		f.CRC = fl&MPAFlagCRC != 0
		f.Reject = fl&MPAFlagReject != 0
		f.Enhanced = fl&MPAFlagEnhanced != 0
		if f.Reject && !wantReply {
			return MPAFrame{}, 0, mpaErr(MPAErrReqRep, "MPA Request has the R (reject) flag set")
		}
	}
	if len(b) > 17 {
		f.Rev = b[17]
		if f.Rev == 0 || f.Rev > 2 {
			return MPAFrame{}, 0, mpaErr(MPAErrReqRep, "unsupported MPA revision %d in %s (want 1 or 2)", f.Rev, kind)
		}
	}
	if len(b) < MPAHeaderLen {
		return MPAFrame{}, 0, ErrNeedMore
	}
	pd := MPAHeader(b).PDLength()
	if pd > MPARFCMaxPrivateData {
		return MPAFrame{}, 0, mpaErr(MPAErrReqRep, "PD_Length %d in %s exceeds RFC 5044's limit of %d", pd, kind, MPARFCMaxPrivateData)
	}
	if pd > MPAMaxPrivateData {
		return MPAFrame{}, 0, mpaErr(MPAErrReqRep, "PD_Length %d in %s exceeds this implementation's limit of %d (that of Linux siw)", pd, kind, MPAMaxPrivateData)
	}
	n = MPAHeaderLen + pd
	if len(b) < n {
		return MPAFrame{}, 0, ErrNeedMore
	}
	f.PrivateData = b[MPAHeaderLen:n:n]
	return f, n, nil
}

func otherKind(wantReply bool) string {
	if wantReply {
		return "Request"
	}
	return "Reply"
}

// MULPDU is the largest ULPDU whose FPDU fits one TCP segment of emss octets
// (RFC 5044 §4.5), with markers every DefaultMarkerSpacing octets or none:
//
//	markers:    EMSS - (6 + 4*ceil(EMSS/512) + EMSS mod 4)
//	no markers: EMSS - (6 + EMSS mod 4)
//
// It is never below 128, as the RFC requires, and never above what one FPDU
// can carry (65535 octets, or TxFramer.MaxULPDU's limit with markers).
func MULPDU(emss int, markers bool) int {
	return mulpdu(emss, markers, DefaultMarkerSpacing)
}

func mulpdu(emss int, markers bool, spacing int) int {
	if emss < 0 {
		emss = 0
	}
	m := emss - (6 + emss%4)
	limit := maxULPDULen
	if markers {
		m -= 4 * ((emss + spacing - 1) / spacing)
		limit = maxULPDUMarkers(spacing)
	}
	return min(max(m, 128), limit)
}

// MPAv2Params is the RFC 6581 §6 enhanced connection setup block that starts
// the private data of a frame with the S flag:
//
//	|A|B|      IRD (14)     |C|D|      ORD (14)     |
type MPAv2Params struct {
	PeerToPeer bool   // A: peer-to-peer (ready-to-receive) negotiation
	SendRTR    bool   // B: a zero-length Send may be the RTR message
	WriteRTR   bool   // C: a zero-length RDMA Write may be the RTR message
	ReadRTR    bool   // D: a zero-length RDMA Read may be the RTR message
	IRD, ORD   uint16 // 14 bits each; MPAv2NoIRDORD asks for no negotiation
}

const (
	MPAv2ParamsLen = 4
	// MPAv2NoIRDORD in IRD or ORD means "no automatic negotiation".
	MPAv2NoIRDORD = 0x3FFF
)

// AppendMPAv2Params appends p's 4-octet wire form.
func AppendMPAv2Params(dst []byte, p MPAv2Params) []byte {
	ird := p.IRD & 0x3FFF
	ord := p.ORD & 0x3FFF
	if p.PeerToPeer {
		ird |= 0x8000
	}
	if p.SendRTR {
		ird |= 0x4000
	}
	if p.WriteRTR {
		ord |= 0x8000
	}
	if p.ReadRTR {
		ord |= 0x4000
	}
	dst = binary.BigEndian.AppendUint16(dst, ird)
	return binary.BigEndian.AppendUint16(dst, ord)
}

// ParseMPAv2Params decodes the block at the start of an enhanced frame's
// private data and returns the rest, the ULP's own private data.
func ParseMPAv2Params(pd []byte) (p MPAv2Params, rest []byte, err error) {
	if len(pd) < MPAv2ParamsLen {
		return p, nil, mpaErr(MPAErrReqRep, "enhanced (S) frame carries %d octets of private data, fewer than the %d-octet IRD/ORD block", len(pd), MPAv2ParamsLen)
	}
	ird := binary.BigEndian.Uint16(pd[0:2])
	ord := binary.BigEndian.Uint16(pd[2:4])
	p = MPAv2Params{
		PeerToPeer: ird&0x8000 != 0,
		SendRTR:    ird&0x4000 != 0,
		WriteRTR:   ord&0x8000 != 0,
		ReadRTR:    ord&0x4000 != 0,
		IRD:        ird & 0x3FFF,
		ORD:        ord & 0x3FFF,
	}
	return p, pd[MPAv2ParamsLen:], nil
}

func (f MPAFrame) String() string {
	kind := "Request"
	if f.Reply {
		kind = "Reply"
	}
	return fmt.Sprintf("MPA %s{M:%t C:%t R:%t S:%t Rev:%d PD:%d}", kind, f.Markers, f.CRC, f.Reject, f.Enhanced, f.Rev, len(f.PrivateData))
}
