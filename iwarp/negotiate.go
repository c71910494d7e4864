package iwarp

// MPA negotiation (RFC 5044 §7.1): the initiator sends a Request, the
// responder answers with a Reply, and both then switch to FPDUs with the
// options the two frames agree on. MPANegotiation is that exchange as a
// state machine fed with whatever bytes have arrived, in pieces of any size:
// a frame split across reads gives ErrNeedMore until it is whole, and the
// outcome never depends on how the bytes were cut.

// MPAConfig is what one end asks for.
type MPAConfig struct {
	Markers     bool   // markers in the FPDUs this end receives
	CRC         bool   // CRC (on for both directions if either end asks)
	Rev         uint8  // 1 or 2; 0 sends MPARevision
	PrivateData []byte // at most MPAMaxPrivateData octets
}

// MPAResult is what the exchange settled.
type MPAResult struct {
	TxMarkers bool // this end puts markers into what it sends
	RxMarkers bool // this end finds markers in what it receives
	CRC       bool
	Peer      MPAFrame // the peer's frame; PrivateData is a copy
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

// NewMPAInitiator starts the initiator's side: Out holds the Request.
func NewMPAInitiator(cfg MPAConfig) (*MPANegotiation, error) {
	f := MPAFrame{Markers: cfg.Markers, CRC: cfg.CRC, Rev: cfg.Rev, PrivateData: cfg.PrivateData}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &MPANegotiation{cfg: cfg, state: mpaAwaitReply, out: AppendMPAFrame(nil, &f)}, nil
}

// NewMPAResponder starts the responder's side: it sends nothing until the
// Request has arrived.
func NewMPAResponder(cfg MPAConfig) (*MPANegotiation, error) {
	f := MPAFrame{Reply: true, Markers: cfg.Markers, CRC: cfg.CRC, Rev: cfg.Rev, PrivateData: cfg.PrivateData}
	if err := f.Validate(); err != nil {
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
	f.PrivateData = append([]byte(nil), f.PrivateData...)
	n.result = MPAResult{CRC: f.CRC || n.cfg.CRC, RxMarkers: n.cfg.Markers, TxMarkers: f.Markers, Peer: f}
	if !reply {
		rf := MPAFrame{Reply: true, Markers: n.cfg.Markers, CRC: n.cfg.CRC, Rev: n.cfg.Rev, PrivateData: n.cfg.PrivateData}
		if rf.Rev == 0 {
			rf.Rev = MPARevision
		}
		// A Reply never claims a newer revision than the Request's (siw
		// answers a Rev 1 Request with Rev 1).
		rf.Rev = min(rf.Rev, f.Rev)
		n.out = AppendMPAFrame(n.out, &rf)
	}
	n.state = mpaDone
	return used, nil
}

func (n *MPANegotiation) fail(err error) error {
	n.state, n.err = mpaFailed, err
	return err
}
