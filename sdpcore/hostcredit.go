package sdpcore

// Credits over shared memory. Over iWARP a credit is a receive buffer of
// BufSize bytes that a message fills; over shared memory a message waits in
// the ring until the application reads it, and the ring, not the buffers,
// bounds the bytes in flight. A bulk sender's messages there are often
// shorter than a buffer (a send cut where the backlog ends: iperf3's averaged
// 44 KB), so 16 credits stopped it with the ring a third full. A side whose
// messages come over shared memory therefore grants sameHostBufs buffers.
// Only an application's bulk send uses the extra ones: small sends, and the
// early queue they join, keep to the Hello's count, so that they still
// coalesce while the peer is behind instead of each spending a message
// (with 64 credits for every send, sockperf's 1 KiB messages ran at 0.4x).

// sameHostBufs is the receive buffers a side grants once its messages come
// over shared memory.
const sameHostBufs = 64

// bulkSend is the least an application's send carries to use the credits
// beyond the Hello's.
const bulkSend = 16 << 10

// growForSameHost grants the peer sameHostBufs buffers once messages come
// over shared memory: the next message's Bufs carries them. The update
// cadence stays at half of the Hello's buffers (maybeReturnCredits).
func (c *Conn) growForSameHost() {
	if c.hostBufs || c.fc != FlowCredit || !c.sameHost() {
		return
	}
	c.hostBufs = true
	c.posted += max(0, sameHostBufs-c.bufs)
}

// sameHost reports whether messages go over shared memory now.
func (c *Conn) sameHost() bool {
	sh, ok := c.tr.(sameHoster)
	return ok && sh.SameHost()
}

// creditsFor is credits for a send: a bulk one (an application's send of at
// least bulkSend bytes) counts every buffer the peer grants, any other only
// as many as the peer's Hello (or HelloAck) granted.
func (c *Conn) creditsFor(bulk bool) int {
	cr := c.credits()
	if !bulk && c.peerBufs > c.helloBufs && c.helloBufs > 0 {
		cr = min(cr, c.helloBufs-int(c.mseq-c.peerAck))
	}
	return cr
}
