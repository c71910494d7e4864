package sdpcore

// The application's SO_SNDBUF and SO_RCVBUF bound what the engine keeps for
// a connection beyond the kernel's own buffers, as they bound what TCP keeps:
// a sender that set a small send buffer has a send block (or fail with the
// peer's reset) after about that much, not after the engine's defaults
// (TxBacklog, the early queue, rxLimit), which are for programs that set
// none.

// minBufSize is the least the kernel gives for either (SOCK_MIN_SNDBUF).
const minBufSize = 4608

// kernelBufSize is what the kernel makes of a size set with setsockopt: it
// doubles it for its bookkeeping (socket(7)); 0 stays 0, not set.
func kernelBufSize(v int) int {
	if v <= 0 {
		return 0
	}
	return max(2*v, minBufSize)
}

// SetBufferSizes applies the sizes the application set (0: not set).
func (c *Conn) SetBufferSizes(sndbuf, rcvbuf int) {
	c.mu.Lock()
	defer c.unlock()
	c.sndLimit, c.rcvLimit = kernelBufSize(sndbuf), kernelBufSize(rcvbuf)
}

// txBacklog bounds the bytes framed and not yet taken by the kernel.
func (c *Conn) txBacklog() int {
	if c.sndLimit > 0 && c.sndLimit < c.cfg.TxBacklog {
		return c.sndLimit
	}
	return c.cfg.TxBacklog
}

// earlyMax bounds the bytes taken before the connection is up.
func (c *Conn) earlyMax() int {
	if c.sndLimit > 0 && c.sndLimit < earlyMax {
		return c.sndLimit
	}
	return earlyMax
}

// rxMax bounds the received payload held for the application. With credit
// flow control it is never less than the buffers this side grants, and in
// the rdma and nic modes never less than its receive ring: the
// peer's messages behind them carry its credits and acknowledgements, and a
// receiver that left them unread while its application waits for its own
// send to go (an echo that reads only while its echo has gone) would hang
// both ends, which TCP does not (TestEchoBackPressure with SO_RCVBUF or
// more buffers). The credits, or the ring, bound what the peer sends anyway.
func (c *Conn) rxMax() int {
	n := rxLimit
	if c.rcvLimit > 0 && c.rcvLimit < rxLimit {
		n = c.rcvLimit
	}
	switch {
	case c.fc == FlowCredit:
		n = max(n, c.bufs*c.bufSize)
	case c.fc.ring():
		// The peer writes no more than our ring holds: a full ring
		// must still let its ring acknowledgements in.
		n = max(n, len(c.ring)+c.bufs*c.bufSize)
	}
	return n
}

// msgRoom is the most one Data message may carry now: a sender with a send
// buffer of its own frames no more than fits in it, but not less than a
// quarter of it (slivers would spend a credit each).
func (c *Conn) msgRoom() int {
	n := c.peerBufSize - BSDHLen
	if c.sndLimit > 0 {
		n = min(n, max(c.txBacklog()-c.tr.TxPending(), c.txBacklog()/4))
	}
	return n
}
