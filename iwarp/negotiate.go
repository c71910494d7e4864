package iwarp

// MPA negotiation (RFC 5044 §7.1, RFC 6581): the initiator sends a Request,
// the responder answers with a Reply, and both then switch to FPDUs with the
// options the two frames agree on. MPANegotiation is that exchange as a
// state machine fed with whatever bytes have arrived, in pieces of any size:
// a frame split across reads gives ErrNeedMore until it is whole, and the
// outcome never depends on how the bytes were cut.
//
// Revision 2 (RFC 6581 enhanced connection establishment) is negotiated
// alongside revision 1: an end configured for Rev 2 sends the S flag and the
// IRD/ORD block at the start of its private data; a responder answers a Rev 1
// Request with a Rev 1 Reply, as siw does, and a Rev 2 Request from a peer
// with a Rev 2 Reply only if it asked for Rev 2 itself. The private data the
// caller gives and gets back is always the ULP's own, without the block.
//
// IRD/ORD (RFC 6581 §9.1): each end announces what it can answer (IRD) and
// what it wants to issue (ORD). The responder lowers its ORD to the
// initiator's IRD; the initiator lowers its ORD to the responder's IRD. A
// Reply whose ORD exceeds the initiator's IRD cannot be satisfied and fails
// with MPA error 6 (insufficient IRD). MPAv2NoIRDORD on either side leaves
// the other's value alone.
//
// Ready-to-receive (RFC 6581 §9.2): when the initiator offers peer-to-peer
// mode (A) with the RTR messages it can send (B Send, C Write, D Read), a
// responder that also wants it picks one and echoes only that bit. The
// initiator must then send that zero-length message as its first FPDU
// (QP.PostRTR) and the responder must receive it before it sends any FPDU
// (QP.ExpectRTR). A responder that wants peer-to-peer mode but finds no RTR
// message it accepts fails with MPA error 7 (no matching RTR).

// RTRType is a set of RFC 6581 ready-to-receive messages.
type RTRType uint8

const (
	RTRSend  RTRType = 1 << iota // zero-length Send (B)
	RTRWrite                     // zero-length RDMA Write (C)
	RTRRead                      // zero-length RDMA Read Request (D)
)

func (t RTRType) String() string {
	s := ""
	for _, r := range [...]struct {
		t    RTRType
		name string
	}{{RTRSend, "Send"}, {RTRWrite, "Write"}, {RTRRead, "Read"}} {
		if t&r.t != 0 {
			if s != "" {
				s += "|"
			}
			s += r.name
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// MPAConfig is what one end asks for.
type MPAConfig struct {
	Markers     bool   // markers in the FPDUs this end receives
	CRC         bool   // CRC (on for both directions if either end asks)
	Rev         uint8  // 1 or 2; 0 sends MPARevision
	PrivateData []byte // at most MPAMaxPrivateData octets (with Rev 2, 4 fewer)

	// Rev 2 only. IRD and ORD are announced in the IRD/ORD block (0 means
	// DefaultIRD / DefaultORD; MPAv2NoIRDORD asks for no negotiation).
	IRD, ORD int
	// PeerToPeer asks for an RTR exchange; RTR lists the RTR messages this
	// end can send (initiator) or accepts (responder).
	PeerToPeer bool
	RTR        RTRType
}

// MPAResult is what the exchange settled.
type MPAResult struct {
	TxMarkers bool // this end puts markers into what it sends
	RxMarkers bool // this end finds markers in what it receives
	CRC       bool
	Peer      MPAFrame // the peer's frame; PrivateData is a copy of the ULP's part

	// Rev is the revision both ends speak; Enhanced is true when both used
	// the RFC 6581 IRD/ORD block, and then PeerParams is the peer's block.
	Rev        uint8
	Enhanced   bool
	PeerParams MPAv2Params
	// IRD and ORD are this end's limits after negotiation (QP.SetReadLimits).
	IRD, ORD int
	// RTR is the ready-to-receive message agreed on (0: none). The
	// initiator sends it (QP.PostRTR), the responder waits for it
	// (QP.ExpectRTR) before it sends anything.
	RTR RTRType
}

type mpaState uint8

const (
	mpaAwaitRequest mpaState = iota // responder
	mpaAwaitReply                   // initiator
	mpaDone
	mpaFailed
)

// MPANegotiation is one end of an MPA Request/Reply exchange.
type MPANegotiation struct {
	cfg    MPAConfig
	state  mpaState
	out    []byte
	result MPAResult
	err    error
}

// rev returns the configured revision.
func (c *MPAConfig) rev() uint8 {
	if c.Rev == 0 {
		return MPARevision
	}
	return c.Rev
}

func irdOrd(v, def int) uint16 {
	switch {
	case v == 0:
		return uint16(def)
	case v < 0:
		return 0
	case v >= MPAv2NoIRDORD:
		return MPAv2NoIRDORD
	}
	return uint16(v)
}

// params is this end's IRD/ORD block before negotiation.
func (c *MPAConfig) params() MPAv2Params {
	p := MPAv2Params{IRD: irdOrd(c.IRD, DefaultIRD), ORD: irdOrd(c.ORD, DefaultORD)}
	if c.PeerToPeer {
		p.PeerToPeer = true
		p.SendRTR = c.RTR&RTRSend != 0
		p.WriteRTR = c.RTR&RTRWrite != 0
		p.ReadRTR = c.RTR&RTRRead != 0
	}
	return p
}

func (p MPAv2Params) rtr() RTRType {
	var t RTRType
	if p.SendRTR {
		t |= RTRSend
	}
	if p.WriteRTR {
		t |= RTRWrite
	}
	if p.ReadRTR {
		t |= RTRRead
	}
	return t
}

// frame builds this end's frame; with enhanced, the private data starts
// with the IRD/ORD block p.
func (c *MPAConfig) frame(reply bool, rev uint8, enhanced bool, p MPAv2Params) (MPAFrame, error) {
	f := MPAFrame{Reply: reply, Markers: c.Markers, CRC: c.CRC, Rev: rev, PrivateData: c.PrivateData}
	if enhanced {
		if len(c.PrivateData) > MPAMaxPrivateData-MPAv2ParamsLen {
			return f, mpaErr(MPAErrReqRep, "%d bytes of private data and the %d-octet IRD/ORD block exceed the limit of %d",
				len(c.PrivateData), MPAv2ParamsLen, MPAMaxPrivateData)
		}
		f.Enhanced = true
		f.PrivateData = append(AppendMPAv2Params(make([]byte, 0, MPAv2ParamsLen+len(c.PrivateData)), p), c.PrivateData...)
	}
	return f, f.Validate()
}

// NewMPAInitiator starts the initiator's side: Out holds the Request.
func NewMPAInitiator(cfg MPAConfig) (*MPANegotiation, error) {
	if cfg.rev() < 2 && (cfg.PeerToPeer || cfg.RTR != 0) {
		return nil, mpaErr(MPAErrReqRep, "peer-to-peer mode (RTR) needs MPA revision 2")
	}
	f, err := cfg.frame(false, cfg.rev(), cfg.rev() >= 2, cfg.params())
	if err != nil {
		return nil, err
	}
	return &MPANegotiation{cfg: cfg, state: mpaAwaitReply, out: AppendMPAFrame(nil, &f)}, nil
}

// NewMPAResponder starts the responder's side: it sends nothing until the
// Request has arrived.
func NewMPAResponder(cfg MPAConfig) (*MPANegotiation, error) {
	if cfg.rev() < 2 && (cfg.PeerToPeer || cfg.RTR != 0) {
		return nil, mpaErr(MPAErrReqRep, "peer-to-peer mode (RTR) needs MPA revision 2")
	}
	if _, err := cfg.frame(true, cfg.rev(), cfg.rev() >= 2, cfg.params()); err != nil {
		return nil, err
	}
	return &MPANegotiation{cfg: cfg, state: mpaAwaitRequest}, nil
}

// Out returns the bytes this end must send now and forgets them.
func (n *MPANegotiation) Out() []byte {
	b := n.out
	n.out = nil
	return b
}

// Done reports whether the exchange finished successfully.
func (n *MPANegotiation) Done() bool { return n.state == mpaDone }

// Result returns the settled options once Done.
func (n *MPANegotiation) Result() (MPAResult, bool) { return n.result, n.state == mpaDone }

// Feed takes the bytes received so far that this end has not consumed. It
// returns how many octets the peer's frame took (the rest are FPDUs and
// belong to Full Operation) and nil once the exchange is done, ErrNeedMore
// while the frame is incomplete, or the *Error that ends it. After an error
// or completion, Feed returns the same outcome and consumes nothing.
//
// A responder that fails on a well-formed Request still has a Reply in Out:
// one with the R flag, which tells the initiator why the connection ends
// (RFC 5044 §7.1.2; RFC 6581 §9.1 and §9.2 for IRD and RTR mismatches).
func (n *MPANegotiation) Feed(b []byte) (int, error) {
	switch n.state {
	case mpaDone:
		return 0, nil
	case mpaFailed:
		return 0, n.err
	}
	reply := n.state == mpaAwaitReply
	f, used, err := ParseMPAFrame(b, reply)
	if err == ErrNeedMore {
		return 0, err
	}
	if err != nil {
		return 0, n.fail(err)
	}
	if reply && f.Reject {
		return 0, n.fail(mpaErr(MPAErrReqRep, "the responder rejected the connection (R set in its Reply)"))
	}
	ulpPD := f.PrivateData
	var peer MPAv2Params
	if f.Enhanced {
		if f.Rev < 2 {
			return 0, n.fail(mpaErr(MPAErrReqRep, "MPA %s has the S (enhanced) flag with revision %d; RFC 6581 needs revision 2",
				kindOf(reply), f.Rev))
		}
		if peer, ulpPD, err = ParseMPAv2Params(f.PrivateData); err != nil {
			return 0, n.fail(err)
		}
	}
	res := MPAResult{CRC: f.CRC || n.cfg.CRC, RxMarkers: n.cfg.Markers, TxMarkers: f.Markers, Rev: f.Rev,
		IRD: DefaultIRD, ORD: DefaultORD}
	if reply {
		err = n.settleInitiator(&res, f, peer)
	} else {
		err = n.settleResponder(&res, f, peer)
	}
	if err != nil {
		return 0, n.fail(err)
	}
	f.PrivateData = append([]byte(nil), ulpPD...)
	res.Peer = f
	n.result = res
	n.state = mpaDone
	return used, nil
}

// settleResponder decides the Reply to Request f and queues it.
func (n *MPANegotiation) settleResponder(res *MPAResult, f MPAFrame, peer MPAv2Params) error {
	// A Reply never claims a newer revision than the Request's (siw
	// answers a Rev 1 Request with Rev 1).
	rev := min(n.cfg.rev(), f.Rev)
	res.Rev = rev
	own := n.cfg.params()
	enhanced := rev >= 2 && f.Enhanced // answer S with S, and only then
	if enhanced {
		res.Enhanced, res.PeerParams = true, peer
		// Never issue more Reads than the initiator can answer.
		if peer.IRD != MPAv2NoIRDORD && own.ORD != MPAv2NoIRDORD && own.ORD > peer.IRD {
			own.ORD = peer.IRD
		}
		own.PeerToPeer, own.SendRTR, own.WriteRTR, own.ReadRTR = false, false, false, false
		if n.cfg.PeerToPeer {
			common := n.cfg.RTR & peer.rtr()
			if !peer.PeerToPeer || common == 0 {
				n.reject(rev, enhanced, own)
				return mpaErr(MPAErrNoMatchingRTR, "the initiator offers RTR %v (peer-to-peer %t), this end accepts %v",
					peer.rtr(), peer.PeerToPeer, n.cfg.RTR)
			}
			// Prefer the zero-length Write, as siw does, then Read, then Send.
			for _, t := range [...]RTRType{RTRWrite, RTRRead, RTRSend} {
				if common&t != 0 {
					res.RTR = t
					break
				}
			}
			own.PeerToPeer = true
			own.SendRTR, own.WriteRTR, own.ReadRTR = res.RTR == RTRSend, res.RTR == RTRWrite, res.RTR == RTRRead
		}
		res.IRD, res.ORD = limit(own.IRD, DefaultIRD), limit(own.ORD, DefaultORD)
	} else if n.cfg.PeerToPeer {
		n.reject(rev, enhanced, own)
		return mpaErr(MPAErrNoMatchingRTR, "the initiator's Rev %d Request has no IRD/ORD block, and this end wants an RTR exchange", f.Rev)
	}
	rf, err := n.cfg.frame(true, rev, enhanced, own)
	if err != nil {
		return err
	}
	n.out = AppendMPAFrame(n.out, &rf)
	return nil
}

// reject queues a Reply with the R flag.
func (n *MPANegotiation) reject(rev uint8, enhanced bool, own MPAv2Params) {
	if rf, err := n.cfg.frame(true, rev, enhanced, own); err == nil {
		rf.Reject = true
		n.out = AppendMPAFrame(n.out, &rf)
	}
}

// settleInitiator checks Reply f against the Request this end sent.
func (n *MPANegotiation) settleInitiator(res *MPAResult, f MPAFrame, peer MPAv2Params) error {
	sent := n.cfg.rev()
	if f.Rev > sent {
		return mpaErr(MPAErrReqRep, "MPA Reply has revision %d, newer than the Request's %d", f.Rev, sent)
	}
	own := n.cfg.params()
	// This end sets S exactly when it sends revision 2; the Reply has S
	// exactly when it answers in revision 2.
	if f.Enhanced != (sent >= 2 && f.Rev >= 2) {
		return mpaErr(MPAErrReqRep, "MPA Reply of revision %d %s the S flag, in answer to a Request of revision %d",
			f.Rev, hasNot(f.Enhanced), sent)
	}
	if !f.Enhanced {
		if n.cfg.PeerToPeer {
			return mpaErr(MPAErrNoMatchingRTR, "the responder answered without an IRD/ORD block; no RTR exchange is possible")
		}
		return nil
	}
	res.Enhanced, res.PeerParams = true, peer
	if peer.ORD != MPAv2NoIRDORD && own.IRD != MPAv2NoIRDORD && peer.ORD > own.IRD {
		return mpaErr(MPAErrInsufficientIRD, "the responder's ORD %d exceeds this end's IRD %d", peer.ORD, own.IRD)
	}
	if peer.IRD != MPAv2NoIRDORD && own.ORD != MPAv2NoIRDORD && own.ORD > peer.IRD {
		own.ORD = peer.IRD
	}
	res.IRD, res.ORD = limit(own.IRD, DefaultIRD), limit(own.ORD, DefaultORD)
	got := peer.rtr()
	switch {
	case n.cfg.PeerToPeer && !peer.PeerToPeer:
		return mpaErr(MPAErrNoMatchingRTR, "the responder declined peer-to-peer mode (A clear in its Reply)")
	case !peer.PeerToPeer && got != 0, peer.PeerToPeer && !n.cfg.PeerToPeer:
		return mpaErr(MPAErrReqRep, "the responder's Reply selects RTR %v without a peer-to-peer offer", got)
	case peer.PeerToPeer && (got&(got-1) != 0 || got&n.cfg.RTR != got || got == 0):
		return mpaErr(MPAErrNoMatchingRTR, "the responder selects RTR %v; it must pick exactly one of %v", got, n.cfg.RTR)
	}
	res.RTR = got
	return nil
}

// limit turns a negotiated 14-bit value into a QP limit.
func limit(v uint16, def int) int {
	if v == MPAv2NoIRDORD {
		return def
	}
	return int(v)
}

func kindOf(reply bool) string {
	if reply {
		return "Reply"
	}
	return "Request"
}

func hasNot(b bool) string {
	if b {
		return "has"
	}
	return "lacks"
}

func (n *MPANegotiation) fail(err error) error {
	n.state, n.err = mpaFailed, err
	return err
}
