package iwarp

// Capabilities describes what this iWARP implementation does itself, so an
// upper layer can drop work that would only repeat it (the central idea of
// Balaji, Bhagvat, Thakur and Panda, "Sockets Direct Protocol for Hybrid
// Network Stacks: A Case Study with iWARP over 10G Ethernet", §4: SDP over
// an RNIC keeps its own flow control and copies because the RNIC does not
// offer what a software stack over TCP gets for free).
type Capabilities struct {
	// FlowControlByTransport: the lower layer is kernel TCP, whose window
	// already stops a sender that outruns its receiver. A Send never fails
	// for want of a posted receive buffer here, so an upper layer may run
	// without credits (SDP_FLOW_CONTROL=transport).
	FlowControlByTransport bool
	// MarkersInSoftware: markers are inserted and removed by the CPU, one
	// copy step each way (see TxStats/RxStats for their count).
	MarkersInSoftware bool
	// CRCInstruction: CRC32C runs on a CPU instruction (SSE4.2 or CLMUL on
	// x86, the CRC32 extension on arm64) rather than a table in software;
	// with AVX-512 VPCLMULQDQ, large FPDUs are also built and checksummed
	// in one pass (crc_amd64.s).
	CRCInstruction bool
	// AppendToQueued: a message posted but not yet on the wire can still
	// grow (QP.AppendSend), so small sends coalesce (Balaji et al.,
	// "Sockets Direct Protocol for Hybrid Network Stacks", §4.2).
	AppendToQueued bool
	// ImmediateData: RFC 7306 Immediate Data messages are carried.
	ImmediateData bool
	// RemoteInvalidate: Send with Invalidate is honoured.
	RemoteInvalidate bool
	// DirectPlacement: tagged payload is read from the socket straight
	// into its registered region (SetDirectPlacement; direct.go).
	DirectPlacement bool
	// MaxMPARevision is the newest MPA revision negotiated (2: RFC 6581
	// IRD/ORD and ready-to-receive), and RTR the ready-to-receive messages
	// this QP can send and accept.
	MaxMPARevision uint8
	RTR            RTRType
	// MaxIRD and MaxORD bound RDMA Reads in flight (QP.SetReadLimits).
	MaxIRD, MaxORD int
	// MULPDU is the largest ULPDU of one FPDU on this QP (0 before Full
	// Operation), and MaxMessage the largest message a Post accepts.
	MULPDU     int
	MaxMessage int
}

// Capabilities reports what the QP does and what its limits are.
func (q *QP) Capabilities() Capabilities {
	return Capabilities{
		FlowControlByTransport: true,
		MarkersInSoftware:      true,
		CRCInstruction:         crcInstruction(),
		AppendToQueued:         true,
		ImmediateData:          true,
		RemoteInvalidate:       true,
		DirectPlacement:        !q.direct.off,
		MaxMPARevision:         2,
		RTR:                    RTRSend | RTRWrite | RTRRead,
		MaxIRD:                 q.ird,
		MaxORD:                 q.ord,
		MULPDU:                 q.mulpdu,
		MaxMessage:             1<<31 - 1,
	}
}
