package sdpcore

import "errors"

// Transport is what SDP needs of the RDMA transport under one connection:
// the setup exchange that carries Hello and HelloAck, Send messages, RDMA
// Write with Immediate Data, RDMA Read, registered memory, and the socket
// the connection waits on. A Conn drives nothing else, so another transport
// (iWARP over the connection's TCP socket, qpTransport, is the first) only has
// to provide these methods.
//
// The Conn's mutex serialises every call; a Transport need not be safe for
// concurrent use. Nothing blocks: operations queue, Flush writes what the
// socket takes, Fill reads what it holds.
type Transport interface {
	SetupExchange
	MessageSender
	MessageReceiver
	MemoryRegions

	// Fd is the socket the connection waits on (poll) and asks about
	// (TCP_MAXSEG, SO_OOBINLINE).
	Fd() int
	// SetFd moves the transport to a duplicate of its socket, when the
	// descriptor the application had is closed while the connection
	// finishes (Linger, SetFd).
	SetFd(fd int)
	// Terminate reports a protocol fault of the peer to it before the
	// connection ends (iWARP's Terminate message), when the fault is one
	// the transport can classify (its own, or one RejectSegment made) and
	// the connection carries messages. It reports whether it queued the
	// report; Flush sends it.
	Terminate(fault error) bool
	// WireStats returns the transport's own counters, for Conn.Stats.
	WireStats() (tx TxStats, rx RxStats, txRecords uint64)
}

// SetupExchange opens the connection before it carries messages: the
// accepting side's setup request carries Hello, the connecting side's
// reply HelloAck (MPA Request and Reply for iWARP). The accepting side's
// request goes out before its Conn exists (the shim writes it), so only the
// reply is sent here.
type SetupExchange interface {
	// PeerSetup parses the peer's setup message (with reply, its reply)
	// from the bytes received so far. ErrIncomplete: not all of it has
	// arrived. It consumes nothing: the caller decides (ConsumeSetup) once
	// it has taken the message, and a message it rejects stays unread.
	PeerSetup(reply bool) (m SetupMsg, n int, err error)
	// ConsumeSetup drops the n bytes of the setup message PeerSetup parsed.
	ConsumeSetup(n int)
	// SendSetupReply queues the connecting side's reply.
	SendSetupReply(m SetupMsg)
	// StartMessages ends the setup exchange: from now on both directions
	// carry messages, framed as the two sides agreed (markers per
	// direction, CRC, marker spacing, and the TCP segment size messages are
	// cut for; 0: the socket's).
	StartMessages(txMarkers, rxMarkers, crc bool, markerSpacing, mss int)
}

// MessageSender queues what SDP sends. Every Post copies what it is given
// (except PostWriteFrom, until Settle), so the caller's buffers are free
// when it returns; nothing reaches the socket before Flush.
type MessageSender interface {
	// PostSend queues one Send message: SDP's messages (BSDH and payload).
	PostSend(msg []byte)
	// PostSendParts is PostSend of the concatenation of parts, so that a
	// Data message's header and the application's buffers need no copy
	// into one buffer first.
	PostSendParts(parts [][]byte)
	// AppendSend grows the last queued Send by the concatenation of parts
	// when none of it is written yet and it still fits one framed unit,
	// so that small sends coalesce into one message. edit sees the whole
	// grown message to fix its header. It reports whether it appended; if
	// not, nothing changed.
	AppendSend(edit func(msg []byte), parts [][]byte) bool
	// PostImmediate queues Immediate Data: the rdma and nic modes'
	// announcement of ring data and of ring space given back.
	PostImmediate(data [ImmediateLen]byte)
	// PostWrite queues an RDMA Write of the concatenation of parts into
	// the peer's region stag at offset to (ring data, Write ZCopy).
	PostWrite(stag STag, to uint64, parts [][]byte)
	// PostWriteFrom is PostWrite of src sent from src itself, without a
	// copy: src must not change until Flush has written it or Settle
	// returns (Write ZCopy from the application's buffer).
	PostWriteFrom(stag STag, to uint64, src []byte)
	// Settle copies whatever of src PostWriteFrom queued and the socket
	// has not taken yet, so that the caller may give src back.
	Settle(src []byte)
	// TxCopied counts the bytes queued from registered or lent memory that
	// had to be copied after all (Settle, Invalidate), all time: SDP
	// counts them as user-space copies.
	TxCopied() uint64
	// PostRead queues an RDMA Read of n bytes from the peer's region src
	// at srcTO into our region sink at sinkTO (Read ZCopy). Its id comes
	// back in a CompReadDone Completion.
	PostRead(sink STag, sinkTO uint64, src STag, srcTO uint64, n uint32) (id uint64, err error)
	// TxPending is the number of bytes queued and not yet written: SDP's
	// send backlog, and whether the socket must be polled for writing.
	TxPending() int
	// Flush writes queued bytes: nil when all are written, unix.EAGAIN
	// when the socket is full, or the socket's error.
	Flush() error
}

// MessageReceiver hands SDP what arrived. RDMA Writes and Read Responses
// are placed into registered memory by the transport and never returned;
// the peer's Read Requests are answered by it.
type MessageReceiver interface {
	// Fill reads what the socket holds without blocking: nil after a read
	// that took bytes, unix.EAGAIN when there were none, ErrPeerClosed at
	// the end of the peer's stream, or the socket's error.
	Fill() error
	// NextSegment puts the next received segment of a message in *seg
	// (a Conn's own, reused: one per FPDU, it is not copied from layer to
	// layer), or returns ErrIncomplete when none has arrived whole, or the
	// peer's protocol fault (which Terminate reports).
	NextSegment(seg *Segment) error
	// RejectSegment returns the fault that reports seg, a segment SDP has
	// no use for, as the transport classifies it for Terminate.
	RejectSegment(seg Segment) error
	// Buffered is the number of received bytes not yet parsed: a stream
	// that ends with some is cut inside a message.
	Buffered() int
	// Drained says that the last Fill found the socket empty or took less
	// than it had room for: a caller about to wait for the socket may skip
	// the read that would only say EAGAIN.
	Drained() bool
	// Rest is what Fill does on EAGAIN, for a caller that skipped that
	// read after Drained: it gives back receive memory that holds nothing.
	Rest()
	// FillQuiet is Fill for a caller that knows the kernel has reported
	// nothing on the socket since the last Fill found it empty: unix.EAGAIN
	// without the system call that would only say so again (a ring in
	// shared memory is still read).
	FillQuiet() error
	// PollCompletions appends the operations finished since the last poll
	// (our RDMA Reads) to dst.
	PollCompletions(dst []Completion) []Completion
}

// MemoryRegions are the buffers the peer may access by RDMA, each named by
// an STag, and what SDP learns of the transport's placements into them.
type MemoryRegions interface {
	// Register makes buf accessible with the given rights and returns the
	// STag that names it. The transport keeps buf itself, not a copy,
	// until Invalidate.
	Register(buf []byte, access Access) (STag, error)
	// Invalidate ends access through s.
	Invalidate(s STag)
	// Rebind moves the region s to buf, which must be as long: its bytes
	// are copied, and transfers still on their way land in buf. SDP takes
	// the application's memory back so from a transfer it cannot wait for.
	Rebind(s STag, buf []byte)
	// Detach is Rebind to a fresh buffer, which it returns, without
	// reading the old one: the application may have freed it.
	Detach(s STag) []byte
	// WatchWrites makes Written count the bytes of RDMA Write messages
	// placed whole into region s (0: none), from 0: the Write ZCopy sink
	// checks the source's RdmaWrCompl against it.
	WatchWrites(s STag)
	// Written is the count WatchWrites started.
	Written() int
	// SetDirectPlacement chooses whether placed data may be read from the
	// socket straight into its region (integrated buffering) or always
	// passes through the transport's receive buffer (separate buffering).
	SetDirectPlacement(on bool)
	// DirectPlaced counts the bytes read straight into regions, all time:
	// SDP counts the rest of what was placed as user-space copies.
	DirectPlaced() uint64
}

// roomEventer is a Transport whose room to send is not the socket's
// (RoomEvent in iwarp.go).
type roomEventer interface{ RoomEvent() Events }

// roomEvent is the socket event to wait for while bytes are queued.
func (c *Conn) roomEvent() Events {
	if r, ok := c.tr.(roomEventer); ok {
		return r.RoomEvent()
	}
	return EvOut
}

// ErrIncomplete reports that what is asked for (a setup message, a
// segment) has not arrived whole yet: read more and retry.
var ErrIncomplete = errors.New("sdp: transport: incomplete")

// ErrPeerClosed reports that the peer's stream ended.
var ErrPeerClosed = errors.New("sdp: transport: stream closed by peer")
