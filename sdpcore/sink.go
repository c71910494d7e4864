package sdpcore

// The receive sink: over shared memory, a receive that finds nothing
// queued lets the transport read the payload of large Data messages from
// the ring straight into the application's buffer (iwarp/sink.go), one
// copy where the receive chunk made two; over a socket with markers, from
// the receive chunk over the markers, one pass where closing their gaps
// and the copy out made two. The transport's segments then
// carry payload that already lies where copyOut would put it: the first
// piece at the start of the buffer, each next one right after the last,
// which holds as long as every byte queued in this receive came through
// the sink (sinkOK). copyOut passes over such a piece instead of copying
// it onto itself, and a piece the receive does not return is copied into
// memory of the connection's own before the call ends (keepSunk): the
// application's buffer is its own again then.

// sendSinker is a transport that can read Send payload into a sink.
type sendSinker interface {
	// SinkSends sets (place non-nil) or clears the sink: place says where
	// a message's payload goes, keep is the octets of each message's
	// start (its BSDH) that do not.
	SinkSends(place func(head []byte, n int) []byte, keep int)
	// Sinkable reports whether received messages come over a stream a
	// sink can read from.
	Sinkable() bool
	// LargeNext reports whether the next message part to read is a large
	// Send a sink would take: its payload (0: it is not), and whether the
	// transport holds all of it already.
	LargeNext() (pay int, whole bool)
	// SinkPlaced counts the payload octets read straight into sinks.
	SinkPlaced() uint64
	// PeerPrompted reports whether the peer asked for its messages to be
	// read as they come (PromptPeer): it sends urgent data, whose mark
	// and SIGURG must not wait behind payload left in the ring.
	PeerPrompted() bool
	// PromptPeer asks the peer to read this side's messages as they come
	// from now on: urgent data follows.
	PromptPeer()
	// ReadForSink readies a blocking receive back from its wait to read
	// the socket itself, into its sink, and reports whether it should: the
	// sink takes payload from what the socket delivers (iWARP with
	// markers), so a look that read it first would close the gaps
	// between the markers in place and leave the receive a second copy.
	ReadForSink() bool
}

// leaveRest says whether progress may stop reading with what it has
// queued, in front of a large Send, which the next receive's sink can then
// take: a receive once its sink cannot take it, and a wait that only reads
// (rxLazy) once there is something to report, if the application's last
// receive (rxBuf) could take that Send whole, else once the next receive
// has its fill (rxBuf bytes queued). With nothing queued yet, a
// large Send whose payload the transport holds whole is that something
// (pollLocked calls the connection readable then), and the receive reads
// it straight into place.
// What else comes (urgent data, the end, credits) is read as it arrives,
// as before, and so is everything a peer that sends urgent data sends.
func (c *Conn) leaveRest() bool {
	receive := c.sinkBuf != nil
	if (!receive && !c.rxLazy) || (receive && c.rqBytes == 0) {
		return false // a receive with nothing to return yet reads on, whatever comes next
	}
	sk, ok := c.tr.(sendSinker)
	if !ok || c.phase() != stEstablished || c.closed {
		return false
	}
	pay, whole := sk.LargeNext()
	switch {
	case pay == 0 || sk.PeerPrompted():
		return false
	case receive:
		// A receive with something to return stops in front of a Send
		// its sink cannot take (no room left, or bytes queued before it
		// that did not go there): the next receive's sink can.
		return !c.sinking(pay)
	case c.rxBuf < pay:
		// The receive could not sink it: read on, many at a time, but
		// only until the next receive has its fill. Reading everything
		// in would hold the ring's contents in receive chunks, which a
		// fresh process makes and populates for it (four of 256 KiB for
		// a curl fetching 2 MiB through a proxy).
		return c.rqBytes > 0 && c.rqBytes >= c.rxBuf
	case c.rqBytes > 0:
		return true
	default:
		return whole
	}
}

// promptPeer tells the peer, before the first urgent byte goes out, to
// read what this side sends as it comes (leaveRest): over TCP the urgent
// mark and SIGURG reach a reader at once, whatever it has not read yet.
func (c *Conn) promptPeer() {
	if c.prompted {
		return
	}
	if sk, ok := c.tr.(sendSinker); ok {
		sk.PromptPeer()
		c.prompted = true
	}
}

// sinkOpen gives the transport bufs' first buffer as the sink for the
// receive about to read, where nothing else needs the bytes first; it
// reports whether it did.
func (c *Conn) sinkOpen(bufs [][]byte, flags RecvFlags) bool {
	if flags&RecvPeek != 0 || c.cfg.Buffering == BufSeparate || c.phase() != stEstablished ||
		c.rdCollect != nil || c.zw != nil || c.zsink != nil || c.urg.mark || c.closed {
		return false
	}
	sk, ok := c.tr.(sendSinker)
	if !ok || !sk.Sinkable() {
		return false
	}
	if c.sinkPlaceFn == nil {
		c.sinkPlaceFn = c.sinkPlace // once: a method value allocates
	}
	c.sinkBuf, c.sunk = firstBuf(bufs), 0
	sk.SinkSends(c.sinkPlaceFn, BSDHLen)
	return true
}

// sinkClose takes the sink back from the transport.
func (c *Conn) sinkClose() {
	sk := c.tr.(sendSinker)
	sk.SinkSends(nil, 0)
	c.sinkBuf = nil
	if placed := sk.SinkPlaced(); placed != c.sinkSeen {
		c.stats.DirectPlacedRx += placed - c.sinkSeen
		c.sinkSeen = placed
	}
}

// sinking reports whether payload of n octets goes into the sink, at
// c.sinkBuf[c.sunk:]: while everything this receive queued went there,
// and it has room.
func (c *Conn) sinking(n int) bool {
	return c.sinkBuf != nil && c.rqBytes == c.sunk && len(c.sinkBuf)-c.sunk >= n && !c.closed && !c.urg.rxPres && c.fb == nil
}

// sinkPlace is the transport's question (iwarp.SinkPlace): where the n
// payload octets of the FPDU it reads go. A Data message's payload
// without urgent data goes into the sink, right after what went there
// before. head is the message's BSDH, nil for a later FPDU of the message
// being received.
func (c *Conn) sinkPlace(head []byte, n int) []byte {
	if !c.sinking(n) {
		return nil
	}
	if head == nil {
		if !c.inMsg || !c.inData {
			return nil
		}
	} else if h := BSDH(head); len(head) < BSDHLen || c.inMsg || h.MID() != MIDData || h.Flags()&(FlagOOBPres|FlagOOBPend) != 0 {
		return nil
	}
	return c.sinkBuf[c.sunk : c.sunk+n : c.sunk+n]
}

// sinkCopy puts payload the transport read into its own memory (a short
// FPDU, the end of a message) into the sink, where copyOut would copy it,
// so that what follows can still go there.
func (c *Conn) sinkCopy(payload []byte) []byte {
	dst := c.sinkBuf[c.sunk : c.sunk+len(payload) : c.sunk+len(payload)]
	c.stats.UserCopiesRx += uint64(copy(dst, payload))
	return dst
}

// keepSunk copies the queued pieces that still lie in the application's
// buffer into memory of the connection's own.
func (c *Conn) keepSunk() {
	for i := c.rqHead; i < len(c.rq); i++ {
		if p := &c.rq[i]; p.sunk {
			p.data = append([]byte(nil), p.data...)
			p.sunk = false
		}
	}
}

// receiveReads says whether a blocking receive's wait for want, back from
// the kernel's, leaves the reading to the receive (ReadForSink): with
// nothing queued, on an established connection whose receive sinks.
func (c *Conn) receiveReads(want Events) bool {
	if want&^(EvIn|EvErr|EvHup) != 0 || want&EvIn == 0 || c.rqBytes > 0 || c.phase() != stEstablished || c.closed || c.fb != nil ||
		c.rdCollect != nil || c.zw != nil || c.zsink != nil || c.urg.mark || c.urg.state == urgValid || c.cfg.Buffering == BufSeparate {
		return false
	}
	sk, ok := c.tr.(sendSinker)
	return ok && sk.ReadForSink()
}
