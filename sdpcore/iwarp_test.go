package sdpcore

import "libsdp/iwarp"

// qp returns the iwarp QP under c, for tests that drive it directly.
func (c *Conn) qp() *iwarp.QP { return c.tr.(*qpTransport).qp() }

// overQP is q as a Conn's Transport, for tests that build a Conn by hand.
func overQP(q *iwarp.QP) Transport { return (*qpTransport)(q) }
