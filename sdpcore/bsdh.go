package sdpcore

import (
	"encoding/binary"
	"strconv"
)

// BSDHLen is the length of the Base Sockets Direct Header that starts every
// SDP message.
const BSDHLen = 16

// MID is an SDP message identifier.
type MID uint8

// Message identifiers of the SDP specification.
const (
	MIDHello         MID = 0x00
	MIDHelloAck      MID = 0x01
	MIDDisConn       MID = 0x02
	MIDAbortConn     MID = 0x03
	MIDSendSM        MID = 0x04
	MIDRdmaWrCompl   MID = 0x05
	MIDRdmaRdCompl   MID = 0x06
	MIDModeChange    MID = 0x07
	MIDSrcAvailCncl  MID = 0x08
	MIDSinkAvailCncl MID = 0x09
	MIDSinkCancelAck MID = 0x0A
	MIDChRcvBuf      MID = 0x0B
	MIDChRcvBufAck   MID = 0x0C
	MIDSuspComm      MID = 0x0D
	MIDSuspCommAck   MID = 0x0E
	MIDSinkAvail     MID = 0xFD
	MIDSrcAvail      MID = 0xFE
	MIDData          MID = 0xFF
)

// zeroCopy says whether m is one of zero copy's messages (SDP's SrcAvail,
// SinkAvail and their answers and cancellations).
func (m MID) zeroCopy() bool {
	switch m {
	case MIDSrcAvail, MIDSinkAvail, MIDRdmaRdCompl, MIDRdmaWrCompl, MIDSendSM,
		MIDSrcAvailCncl, MIDSinkAvailCncl, MIDSinkCancelAck:
		return true
	}
	return false
}

func (m MID) String() string {
	switch m {
	case MIDHello:
		return "Hello"
	case MIDHelloAck:
		return "HelloAck"
	case MIDDisConn:
		return "DisConn"
	case MIDAbortConn:
		return "AbortConn"
	case MIDSendSM:
		return "SendSM"
	case MIDRdmaWrCompl:
		return "RdmaWrCompl"
	case MIDRdmaRdCompl:
		return "RdmaRdCompl"
	case MIDModeChange:
		return "ModeChange"
	case MIDSrcAvailCncl:
		return "SrcAvailCancel"
	case MIDSinkAvailCncl:
		return "SinkAvailCancel"
	case MIDSinkCancelAck:
		return "SinkCancelAck"
	case MIDChRcvBuf:
		return "ChRcvBuf"
	case MIDChRcvBufAck:
		return "ChRcvBufAck"
	case MIDSuspComm:
		return "SuspComm"
	case MIDSuspCommAck:
		return "SuspCommAck"
	case MIDSinkAvail:
		return "SinkAvail"
	case MIDSrcAvail:
		return "SrcAvail"
	case MIDData:
		return "Data"
	}
	return "MID(" + strconv.Itoa(int(m)) + ")"
}

// BSDH flags.
const (
	FlagOOBPres = 0x01
	FlagOOBPend = 0x02
	FlagReqPipe = 0x04
)

// BSDH is a view of a Base Sockets Direct Header:
// MID(1) Flags(1) Bufs(2) Len(4) MSeq(4) MSeqAck(4), big-endian.
type BSDH []byte

// MID returns the message identifier.
func (h BSDH) MID() MID { return MID(h[0]) }

// Flags returns the OOB/pipe flags.
func (h BSDH) Flags() uint8 { return h[1] }

// Bufs returns the number of receive buffers the sender has posted: the
// credits it grants, as of the message named by MSeqAck.
func (h BSDH) Bufs() uint16 { return binary.BigEndian.Uint16(h[2:]) }

// Len returns the length of the whole message, headers included.
func (h BSDH) Len() uint32 { return binary.BigEndian.Uint32(h[4:]) }

// MSeq returns the sender's sequence number of this message.
func (h BSDH) MSeq() uint32 { return binary.BigEndian.Uint32(h[8:]) }

// MSeqAck returns the sequence number of the last message the sender received.
func (h BSDH) MSeqAck() uint32 { return binary.BigEndian.Uint32(h[12:]) }

// BSDHFields holds the values EncodeBSDH writes.
type BSDHFields struct {
	MID     MID
	Flags   uint8
	Bufs    uint16
	Len     uint32
	MSeq    uint32
	MSeqAck uint32
}

// EncodeBSDH writes f into b[:BSDHLen].
func EncodeBSDH(b []byte, f BSDHFields) {
	_ = b[BSDHLen-1]
	b[0] = byte(f.MID)
	b[1] = f.Flags
	binary.BigEndian.PutUint16(b[2:], f.Bufs)
	binary.BigEndian.PutUint32(b[4:], f.Len)
	binary.BigEndian.PutUint32(b[8:], f.MSeq)
	binary.BigEndian.PutUint32(b[12:], f.MSeqAck)
}
