package iwarp

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ready-to-receive messages (RFC 6581 §9.2). In peer-to-peer mode the
// initiator's first FPDU is a zero-length message of the type the MPA
// exchange agreed on, and the responder sends nothing until it has arrived:
// that message proves the initiator is in Full Operation, so the
// responder's first FPDU cannot overtake the initiator's switch to framing.

// rtrSTag is the STag a zero-length RTR Write or Read names. It names no
// memory (the length is 0, so nothing is checked); 1 is what siw sends.
const rtrSTag = 1

// PostRTR queues the RTR message t (one of RTRSend, RTRWrite, RTRRead), as
// the initiator must right after entering Full Operation when the MPA
// exchange settled on t (MPAResult.RTR). A zero-length Read Request takes
// an ORD slot until its zero-length Read Response arrives, which completes
// it without a Completion.
func (q *QP) PostRTR(t RTRType) error {
	switch t {
	case RTRSend:
		q.PostSend(OpSend)
	case RTRWrite:
		q.PostWrite(rtrSTag, 0)
	case RTRRead:
		if len(q.reads) >= q.ord {
			return ErrORDExceeded
		}
		r := ReadRequest{SinkSTag: rtrSTag, SrcSTag: rtrSTag}
		q.reads = append(q.reads, pendingRead{req: r, rtr: true})
		var b [ReadRequestHeaderLen]byte
		EncodeReadRequest(b[:], &r)
		q.postUntagged(OpReadRequest, QNReadRequest, 0, [][]byte{b[:]})
	default:
		return fmt.Errorf("iwarp: RTR type %v: want exactly one of Send, Write, Read", t)
	}
	return nil
}

// ExpectRTR makes the QP take the first message it receives as the RTR
// message t: anything else is MPA error 7 (no matching RTR). The RTR is
// consumed (a Read RTR is answered with a zero-length Read Response), never
// returned or completed. RTRPending reports whether it is still awaited;
// the responder must not send FPDUs until it is not.
func (q *QP) ExpectRTR(t RTRType) { q.expectRTR = t }

// RTRPending reports whether the RTR message ExpectRTR asked for has not
// arrived yet.
func (q *QP) RTRPending() bool { return q.expectRTR != 0 }

// checkRTR judges the first segment received while an RTR is expected.
func (q *QP) checkRTR(s *DDPSegment) error {
	want := q.expectRTR
	ok := s.Last
	switch want {
	case RTRSend:
		ok = ok && !s.Tagged && s.Opcode() == OpSend && len(s.Payload) == 0
	case RTRWrite:
		ok = ok && s.Tagged && s.Opcode() == OpRDMAWrite && len(s.Payload) == 0
	case RTRRead:
		ok = ok && !s.Tagged && s.Opcode() == OpReadRequest && len(s.Payload) == ReadRequestHeaderLen &&
			ReadRequestHeader(s.Payload).RDMARDSZ() == 0
	default:
		ok = false
	}
	if !ok {
		return mpaErr(MPAErrNoMatchingRTR, "first message is %v (%d octets, last %t), not the zero-length %v RTR agreed on",
			s.Opcode(), len(s.Payload), s.Last, want)
	}
	q.expectRTR = 0
	q.rtrSeg = true
	return nil
}

// SocketMSS returns the TCP maximum segment size of the connected socket
// fd (TCP_MAXSEG), or 0 when the kernel does not say.
func SocketMSS(fd int) int {
	m, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_MAXSEG)
	if err != nil || m <= 0 {
		return 0
	}
	return m
}

// SameHost says whether the connected socket fd reaches a peer on this host:
// its peer's address is a loopback address or its own local address (the
// kernel routes both through the loopback device).
func SameHost(fd int) bool {
	peer, _, ok1 := SocketAddr(fd, true)
	local, _, ok2 := SocketAddr(fd, false)
	return ok1 && ok2 && SameHostAddr(peer, local)
}

// SocketAddr returns the peer's (peer) or the local address and port of
// the socket fd, the IP as 16 octets (IPv4 as v4-mapped); ok is false for
// an error or another family. One system call, no allocation: unix's
// Getpeername and Getsockname allocate, and for IPv4 ask the kernel for
// the socket's protocol too (SO_PROTOCOL, for L2TP), a second system call
// at every connection's start.
func SocketAddr(fd int, peer bool) (addr [16]byte, port uint16, ok bool) {
	var rsa unix.RawSockaddrAny
	n := uint32(unix.SizeofSockaddrAny)
	nr := uintptr(unix.SYS_GETSOCKNAME)
	if peer {
		nr = unix.SYS_GETPEERNAME
	}
	_, _, e := unix.RawSyscall(nr, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&n)))
	if e != 0 {
		return addr, 0, false
	}
	switch rsa.Addr.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&rsa))
		addr[10], addr[11] = 0xff, 0xff
		copy(addr[12:], sa.Addr[:])
		return addr, binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:]), true
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&rsa))
		return sa.Addr, binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:]), true
	}
	return addr, 0, false
}

// SameHostAddr: the peer p is 127.0.0.0/8 (v4-mapped), ::1, or the local
// address l (16 octets each, IPv4 as v4-mapped).
func SameHostAddr(p, l [16]byte) bool {
	mapped := [10]byte(p[:10]) == [10]byte{} && p[10] == 0xff && p[11] == 0xff
	return p != [16]byte{} && ((mapped && p[12] == 127) || p == [16]byte{15: 1} || p == l)
}
