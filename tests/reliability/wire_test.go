package reliability

import (
	"encoding/binary"
	"hash/crc32"
)

// A peer without libsdp, written from the wire formats (RFC 5044 MPA, RFC 5041 DDP, RFC 5040
// RDMAP, the SDP BSDH and HelloAck) rather than with the engine's own encoders, so that the
// hostile tests do not share the engine's assumptions.

const (
	mpaHeaderLen = 20
	mpaFlagM     = 0x80
	mpaFlagC     = 0x40
	markerLen    = 4
	crcLen       = 4

	ddpUntaggedLen = 18
	ddpTaggedLen   = 14
	readReqLen     = 28
	bsdhLen        = 16

	opRDMAWrite    = 0x0
	opReadRequest  = 0x1
	opReadResponse = 0x2
	opSend         = 0x3

	qnSend    = 0
	qnReadReq = 1

	midHelloAck = 0x01
	midData     = 0xFF
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// mpaReply is an MPA Reply frame carrying pd.
func mpaReply(markers, crc bool, pd []byte) []byte {
	b := make([]byte, mpaHeaderLen, mpaHeaderLen+len(pd))
	copy(b, "MPA ID Rep Frame")
	if markers {
		b[16] |= mpaFlagM
	}
	if crc {
		b[16] |= mpaFlagC
	}
	b[17] = 1
	binary.BigEndian.PutUint16(b[18:], uint16(len(pd)))
	return append(b, pd...)
}

// bsdh is an SDP Base Sockets Direct Header.
func bsdh(mid byte, bufs uint16, length, mseq, mseqAck uint32) []byte {
	b := make([]byte, bsdhLen)
	b[0] = mid
	binary.BigEndian.PutUint16(b[2:], bufs)
	binary.BigEndian.PutUint32(b[4:], length)
	binary.BigEndian.PutUint32(b[8:], mseq)
	binary.BigEndian.PutUint32(b[12:], mseqAck)
	return b
}

// helloAck is an SDP HelloAck (BSDH and HAH): version 1.1, IPv4, credit flow control.
func helloAck(bufs uint16, rcvSz uint32) []byte {
	b := bsdh(midHelloAck, bufs, bsdhLen+8, 0, 0)
	hah := make([]byte, 8)
	hah[0] = 0x11
	hah[1] = 4 << 4
	hah[2] = 0x80
	binary.BigEndian.PutUint32(hah[4:], rcvSz)
	return append(b, hah...)
}

// untagged is an untagged DDP header with its RDMAP control octet.
func untagged(last bool, op byte, qn, msn, mo uint32) []byte {
	b := make([]byte, ddpUntaggedLen)
	b[0] = 0x01
	if last {
		b[0] |= 0x40
	}
	b[1] = 1<<6 | op
	binary.BigEndian.PutUint32(b[6:], qn)
	binary.BigEndian.PutUint32(b[10:], msn)
	binary.BigEndian.PutUint32(b[14:], mo)
	return b
}

// tagged is a tagged DDP header with its RDMAP control octet.
func tagged(last bool, op byte, stag uint32, to uint64) []byte {
	b := make([]byte, ddpTaggedLen)
	b[0] = 0x80 | 0x01
	if last {
		b[0] |= 0x40
	}
	b[1] = 1<<6 | op
	binary.BigEndian.PutUint32(b[2:], stag)
	binary.BigEndian.PutUint64(b[6:], to)
	return b
}

// framer writes FPDUs: ULPDU_Length, ULPDU, pad, CRC32c, with a marker at every 512th octet of
// the stream after the Reply when markers are on.
type framer struct {
	markers, crc bool
	pos          int
}

func (f *framer) fpdu(ulpdu []byte) []byte {
	logical := make([]byte, 2, 2+len(ulpdu)+3)
	binary.BigEndian.PutUint16(logical, uint16(len(ulpdu)))
	logical = append(logical, ulpdu...)
	for len(logical)%4 != 0 {
		logical = append(logical, 0)
	}
	var out []byte
	marker := func(ptr int) {
		out = append(out, 0, 0, byte(ptr>>8), byte(ptr))
		f.pos += markerLen
	}
	if f.markers && f.pos%markerSpacing == 0 {
		marker(0)
	}
	hdr := f.pos
	for _, b := range logical {
		if f.markers && f.pos%markerSpacing == 0 {
			marker(f.pos - hdr)
		}
		out = append(out, b)
		f.pos++
	}
	if f.markers && f.pos%markerSpacing == 0 {
		marker(f.pos - hdr)
	}
	var sum uint32
	if f.crc {
		sum = crc32.Checksum(out, castagnoli)
	}
	out = binary.LittleEndian.AppendUint32(out, sum)
	f.pos += crcLen
	return out
}

const (
	opImmediate = 0x8
	midChRcvBuf = 0x0B
	flowRDMA    = 1 // HAH byte 2: 0x80 | code; credit 0, rdma 1, nic 2, transport 3
)

// helloAckRing is a HelloAck choosing the rdma flow-control mode (a sender-managed receive
// ring) and naming the sender's ring.
func helloAckRing(bufs uint16, rcvSz, ringSTag, ringSize uint32) []byte {
	b := bsdh(midHelloAck, bufs, bsdhLen+16, 0, 0)
	hah := make([]byte, 16)
	hah[0] = 0x11
	hah[1] = 4 << 4
	hah[2] = 0x80 | flowRDMA
	binary.BigEndian.PutUint32(hah[4:], rcvSz)
	binary.BigEndian.PutUint32(hah[8:], ringSTag)
	binary.BigEndian.PutUint32(hah[12:], ringSize)
	return append(b, hah...)
}

// immediate is an RDMA Immediate Data message (RFC 7306) carrying 8 octets.
func immediate(msn uint32, data [8]byte) []byte {
	return append(untagged(true, opImmediate, qnSend, msn, 0), data[:]...)
}
