package iwarp

// A large message's FPDUs framed straight into a stream's ring (shared
// memory), each one record, instead of into the transmit buffer first and
// from there into the ring: one copy of the payload where there were two.
// Only while nothing waits in the transmit buffer (order), without markers
// and CRC (as the receive sink), and FPDU by FPDU while the ring has room
// for a whole one; the rest of the message takes the transmit buffer, and
// Flush writes it as before.

// RecordStream is a stream that takes a record gathered from parts when
// it has room for all of it (shm.Stream).
type RecordStream interface {
	// AppendRecord appends the concatenation of parts as one record if
	// the ring has room for it now, unpublished until Push; false and
	// nothing written if not.
	AppendRecord(parts ...[]byte) (bool, error)
	// Push publishes what AppendRecord wrote and wakes the reader if it
	// sleeps.
	Push()
}

// crcZero is an FPDU's PAD and CRC field without CRC: zeros.
var crcZero [3 + crcLen]byte

// postDirect frames segments of the message h, parts (total payload
// octets, hl header octets per segment) straight into the stream while it
// can, and returns how far it got: the payload offset mo and the position
// in parts (pi, po) where post goes on.
func (q *QP) postDirect(h segHeader, parts [][]byte, total, hl int) (mo, pi, po int) {
	if q.recorder == nil || total < sinkMin || q.txoff != len(q.txbuf) || !q.streaming() || q.tx.markers || q.tx.crc {
		return 0, 0, 0
	}
	pushed := false
	for mo < total {
		n := min(total-mo, q.segmentFit()-hl)
		last := mo+n == total
		ulen := hl + n
		h.encode(q.dhdr[ulpduLenLen:], last, mo)
		q.dhdr[0], q.dhdr[1] = byte(ulen>>8), byte(ulen)
		seg, npi, npo := appendParts(append(q.scratch[:0], q.dhdr[:ulpduLenLen+hl]), parts, pi, po, n)
		seg = append(seg, crcZero[:padLen(ulen)+crcLen])
		ok, err := q.recorder.AppendRecord(seg...)
		clear(seg)
		q.scratch = seg[:0]
		if !ok || err != nil {
			break // the transmit buffer takes the rest; Flush meets the error
		}
		q.tx.count(ulen)
		q.txDirect += uint64(n)
		pushed = true
		mo, pi, po = mo+n, npi, npo
	}
	if pushed {
		q.last.ok = false
		q.recorder.Push()
	}
	return mo, pi, po
}

// TxDirect counts the payload octets framed straight into a stream.
func (q *QP) TxDirect() uint64 { return q.txDirect }
