package sdpcore

import (
	"encoding/binary"
	"fmt"

	"libsdp/iwarp"
)

// Hello and HelloAck open an SDP connection. Over iWARP they ride in the
// private data of the MPA Request (Hello, sent by the accepting side, which
// is the MPA initiator) and of the MPA Reply (HelloAck). Their BSDH carries
// MSeq 0 and, in Bufs, the receive buffers the sender has posted: the
// credits the peer starts with.

// Protocol version carried in Hello/HelloAck (MajV:4 MinV:4).
const (
	Version      = 0x11
	HHLen        = 48
	HAHLen       = 8
	HelloLen     = BSDHLen + HHLen
	HelloAckLen  = BSDHLen + HAHLen
	minRecvBufs  = 4
	minRecvBufSz = BSDHLen + 1024
)

// Hello is the content of an SDP Hello message (BSDH + Hello Header).
type Hello struct {
	Bufs        uint16 // initial credits granted to the peer
	MaxAdverts  uint8
	IPVersion   uint8 // 4 or 6
	Cap         uint8
	DesRemRcvSz uint32   // receive buffer size wished for the peer
	LocalRcvSz  uint32   // our receive buffer size, BSDH included
	LocalPort   uint16   // the application's port
	SrcIP       [16]byte // IPv4 in the last 4 bytes
	DstIP       [16]byte
	// FlowControl is the mode the sender asks for (HH byte 14: 0x80|code;
	// 0, as older peers send, means credit).
	FlowControl FlowControl
}

// Local reports whether the Hello's destination (the connecting side) is
// on the sender's host, by iwarp.SameHostAddr's rule. The accepting side's
// shim asks no markers and no CRC of such a peer when it allows shared
// memory (AppendRequest).
func (h *Hello) Local() bool {
	return iwarp.SameHostAddr(h.mapped(h.DstIP), h.mapped(h.SrcIP))
}

// mapped is an address of the Hello as 16 octets with IPv4 v4-mapped: an
// IPv4 socket's address travels in the last 4 octets, the rest 0. No
// address (0) stays 0, which is nobody's.
func (h *Hello) mapped(a [16]byte) [16]byte {
	if h.IPVersion == 4 && a[10] == 0 && a[11] == 0 && a != [16]byte{} {
		a[10], a[11] = 0xff, 0xff
	}
	return a
}

// flowAsked marks a flow-control code in HH byte 14 and HAH byte 2.
const flowAsked = 0x80

func encodeFlow(f FlowControl) byte { return flowAsked | byte(f) }

// decodeFlow reads a flow-control byte; anything this version does not
// know is credit, which every SDP peer supports.
func decodeFlow(b byte) FlowControl {
	if b&flowAsked == 0 || FlowControl(b&0x7f) >= numFlowControls {
		return FlowCredit
	}
	return FlowControl(b & 0x7f)
}

// AppendHello appends the Hello message to dst.
func AppendHello(dst []byte, h *Hello) []byte {
	off := len(dst)
	dst = append(dst, make([]byte, HelloLen)...)
	b := dst[off:]
	EncodeBSDH(b, BSDHFields{MID: MIDHello, Bufs: h.Bufs, Len: HelloLen})
	hh := b[BSDHLen:]
	hh[0] = Version
	hh[1] = h.IPVersion<<4 | h.Cap&0x0f
	hh[3] = h.MaxAdverts
	binary.BigEndian.PutUint32(hh[4:], h.DesRemRcvSz)
	binary.BigEndian.PutUint32(hh[8:], h.LocalRcvSz)
	binary.BigEndian.PutUint16(hh[12:], h.LocalPort)
	copy(hh[16:32], h.SrcIP[:])
	hh[14] = encodeFlow(h.FlowControl)
	copy(hh[32:48], h.DstIP[:])
	return dst
}

// ParseHello parses a Hello message at the start of pd (MPA Request private
// data) and checks what this implementation needs from it.
func ParseHello(pd []byte) (Hello, error) {
	var h Hello
	if err := checkHead(pd, MIDHello, HelloLen); err != nil {
		return h, err
	}
	b := BSDH(pd)
	hh := pd[BSDHLen:]
	if hh[0]>>4 != Version>>4 {
		return h, fmt.Errorf("sdp: Hello version %d.%d, want %d.x", hh[0]>>4, hh[0]&0xf, Version>>4)
	}
	h.Bufs = b.Bufs()
	h.IPVersion = hh[1] >> 4
	h.Cap = hh[1] & 0x0f
	h.MaxAdverts = hh[3]
	h.DesRemRcvSz = binary.BigEndian.Uint32(hh[4:])
	h.LocalRcvSz = binary.BigEndian.Uint32(hh[8:])
	h.LocalPort = binary.BigEndian.Uint16(hh[12:])
	copy(h.SrcIP[:], hh[16:32])
	copy(h.DstIP[:], hh[32:48])
	h.FlowControl = decodeFlow(hh[14])
	if h.IPVersion != 4 && h.IPVersion != 6 {
		return h, fmt.Errorf("sdp: Hello IP version %d", h.IPVersion)
	}
	if err := checkBuffers(h.Bufs, h.LocalRcvSz); err != nil {
		return h, fmt.Errorf("sdp: Hello: %w", err)
	}
	return h, nil
}

// HelloAck is the content of an SDP HelloAck message (BSDH + HAH).
type HelloAck struct {
	Bufs       uint16
	MaxAdverts uint8
	IPVersion  uint8
	Cap        uint8
	ActRcvSz   uint32 // our receive buffer size, BSDH included
	// FlowControl is the mode both ends use from now on (HAH byte 2).
	FlowControl FlowControl
	// RingSTag and RingSize name the connecting side's receive ring in the
	// rdma and nic modes (HAH bytes 8-15, present then or with SameHost).
	RingSTag, RingSize uint32
	// SameHost names the rendezvous where the accepting side may take
	// shared memory (HAH bytes 16-31, present when Cap has CapSameHost;
	// samehost.go).
	SameHost [16]byte
}

// hahRingLen is the HAH with the ring fields of the rdma and nic modes;
// hahSameHostLen with the rendezvous's name after them.
const (
	hahRingLen     = HAHLen + 8
	hahSameHostLen = hahRingLen + 16
)

// AppendHelloAck appends the HelloAck message to dst.
func AppendHelloAck(dst []byte, h *HelloAck) []byte {
	n := HelloAckLen
	switch {
	case h.Cap&CapSameHost != 0:
		n = BSDHLen + hahSameHostLen
	case h.FlowControl.ring():
		n = BSDHLen + hahRingLen
	}
	off := len(dst)
	dst = append(dst, make([]byte, n)...)
	b := dst[off:]
	EncodeBSDH(b, BSDHFields{MID: MIDHelloAck, Bufs: h.Bufs, Len: uint32(n)})
	ha := b[BSDHLen:]
	ha[0] = Version
	ha[1] = h.IPVersion<<4 | h.Cap&0x0f
	ha[2] = encodeFlow(h.FlowControl)
	ha[3] = h.MaxAdverts
	binary.BigEndian.PutUint32(ha[4:], h.ActRcvSz)
	if h.FlowControl.ring() {
		binary.BigEndian.PutUint32(ha[8:], h.RingSTag)
		binary.BigEndian.PutUint32(ha[12:], h.RingSize)
	}
	if h.Cap&CapSameHost != 0 {
		copy(ha[16:32], h.SameHost[:])
	}
	return dst
}

// ParseHelloAck parses a HelloAck at the start of pd (MPA Reply private data).
func ParseHelloAck(pd []byte) (HelloAck, error) {
	var h HelloAck
	if err := checkHead(pd, MIDHelloAck, HelloAckLen); err != nil {
		return h, err
	}
	ha := pd[BSDHLen:]
	if ha[0]>>4 != Version>>4 {
		return h, fmt.Errorf("sdp: HelloAck version %d.%d, want %d.x", ha[0]>>4, ha[0]&0xf, Version>>4)
	}
	h.Bufs = BSDH(pd).Bufs()
	h.IPVersion = ha[1] >> 4
	h.Cap = ha[1] & 0x0f
	h.MaxAdverts = ha[3]
	h.ActRcvSz = binary.BigEndian.Uint32(ha[4:])
	h.FlowControl = decodeFlow(ha[2])
	if h.FlowControl.ring() {
		if int(BSDH(pd).Len()) < BSDHLen+hahRingLen {
			return h, fmt.Errorf("sdp: HelloAck for %v flow control without its ring", h.FlowControl)
		}
		h.RingSTag = binary.BigEndian.Uint32(ha[8:])
		h.RingSize = binary.BigEndian.Uint32(ha[12:])
		if err := checkRing(h.RingSize); err != nil {
			return h, fmt.Errorf("sdp: HelloAck: %w", err)
		}
	}
	if h.Cap&CapSameHost != 0 {
		if int(BSDH(pd).Len()) < BSDHLen+hahSameHostLen {
			return h, fmt.Errorf("sdp: HelloAck offers shared memory without naming its rendezvous")
		}
		copy(h.SameHost[:], ha[16:32])
	}
	if err := checkBuffers(h.Bufs, h.ActRcvSz); err != nil {
		return h, fmt.Errorf("sdp: HelloAck: %w", err)
	}
	return h, nil
}

func checkHead(pd []byte, mid MID, n int) error {
	if len(pd) < n {
		return fmt.Errorf("sdp: %v of %d bytes, want at least %d", mid, len(pd), n)
	}
	b := BSDH(pd)
	if b.MID() != mid {
		return fmt.Errorf("sdp: got %v where %v was expected", b.MID(), mid)
	}
	if b.Len() < uint32(n) || b.Len() > uint32(len(pd)) {
		return fmt.Errorf("sdp: %v length field %d does not fit %d bytes of private data", mid, b.Len(), len(pd))
	}
	if b.MSeq() != 0 {
		return fmt.Errorf("sdp: %v with MSeq %d, want 0", mid, b.MSeq())
	}
	return nil
}

func checkBuffers(bufs uint16, size uint32) error {
	if bufs < minRecvBufs {
		return fmt.Errorf("%d receive buffers, need at least %d", bufs, minRecvBufs)
	}
	if size < minRecvBufSz || size > maxRecvBufSz {
		return fmt.Errorf("receive buffer size %d outside [%d, %d]", size, minRecvBufSz, maxRecvBufSz)
	}
	return nil
}

// checkRing checks the size of a receive ring a peer announces.
func checkRing(size uint32) error {
	if size < minRecvBufs*minRecvBufSz || size > maxRecvBufs*maxRecvBufSz {
		return fmt.Errorf("receive ring of %d bytes", size)
	}
	return nil
}
