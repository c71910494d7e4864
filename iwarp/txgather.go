package iwarp

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Zero-copy transmit of tagged payload (gathering, as the scatter/gather
// marker insertion of Balaji, Feng, Bhagvat, Panda, Thakur and Gropp,
// "Analyzing the Impact of Supporting Out-of-Order Communication on
// In-order Performance with iWARP", §III-B, does on a NIC). A Read
// Response is framed into the transmit buffer as usual, markers, headers,
// PAD and CRC included, except that its payload octets are not copied
// there: their place in the buffer is a hole, and Flush hands the kernel
// iovecs that point into the registered region itself for it. The CRC is
// computed over the region's octets when the FPDU is framed. So the region
// must not change until the hole is written: a ULP that takes its memory
// back first (Rebind, Invalidate) gets the holes filled from the region
// before, the one copy it then pays (TxCopied counts it).

// hole is a range of the transmit buffer whose octets are src.
type hole struct {
	start int // offset in txbuf
	src   []byte
}

func (h hole) end() int { return h.start + len(h.src) }

// gatherMin is the least payload worth a hole: below it a copy is cheaper
// than the iovecs.
const gatherMin = 256

// postTaggedGather is postTagged for one payload slice that stays where it
// is until Flush has written it.
func (q *QP) postTaggedGather(op Opcode, stag STag, to uint64, src []byte) {
	q.last.ok = false
	const hl = DDPTaggedHeaderLen
	q.reserveTx(len(src), hl)
	ctrl := RDMAPCtrl(op)
	mo := 0
	for {
		n := min(len(src)-mo, q.segmentFit()-hl)
		last := mo+n == len(src)
		EncodeTaggedHeader(q.hdr[:], last, ctrl, uint32(stag), to+uint64(mo))
		pay := src[mo : mo+n]
		var r Reserved
		q.txbuf, r = q.tx.ReserveFPDU(q.txbuf, hl+n, q.scratch[:0])
		base := len(q.txbuf) - len(r.fpdu)
		holes := q.sealHoles[:0]
		skip := hl // header octets still to write into the pieces
		for _, p := range r.Pieces {
			if skip > 0 {
				k := copy(p, q.hdr[hl-skip:hl])
				skip -= k
				p = p[k:]
			}
			if len(p) == 0 {
				continue
			}
			off := int(uintptr(unsafe.Pointer(&p[0])) - uintptr(unsafe.Pointer(&r.fpdu[0])))
			holes = append(holes, Hole{Off: off, Src: pay[:len(p)]})
			q.holes = append(q.holes, hole{start: base + off, src: pay[:len(p)]})
			pay = pay[len(p):]
		}
		q.gparts[0], q.gparts[1] = q.hdr[:hl], src[mo:mo+n]
		q.tx.sealFPDUParts(r, holes, q.gparts[:])
		q.gparts = [2][]byte{}
		clear(holes)
		q.sealHoles = holes[:0]
		clear(r.Pieces)
		q.scratch = r.Pieces[:0]
		q.txEnds = append(q.txEnds, len(q.txbuf))
		q.gathered += uint64(n)
		mo += n
		if last {
			return
		}
	}
}

// TxGathered counts the payload octets framed without a copy (holes);
// TxCopied those of them copied after all (fillHoles).
func (q *QP) TxGathered() uint64 { return q.gathered }

// TxCopied is the count TxGathered describes.
func (q *QP) TxCopied() uint64 { return q.holeCopied }

// fillHoles copies into the transmit buffer the unwritten holes whose
// octets lie in buf, which is about to change or go away.
func (q *QP) fillHoles(buf []byte) {
	keep := q.holes[:0]
	for _, h := range q.holes {
		if overlaps(h.src, buf) && h.end() > q.txoff {
			copy(q.txbuf[h.start:h.end()], h.src)
			q.holeCopied += uint64(len(h.src))
			continue
		}
		keep = append(keep, h)
	}
	clear(q.holes[len(keep):])
	q.holes = keep
}

// moveHoles points the unwritten holes whose octets lie in old at the same
// octets of buf, a copy of old.
func (q *QP) moveHoles(old, buf []byte) {
	for i := range q.holes {
		h := &q.holes[i]
		if overlaps(h.src, old) {
			off := int(uintptr(unsafe.Pointer(&h.src[0])) - uintptr(unsafe.Pointer(&old[0])))
			h.src = buf[off : off+len(h.src) : off+len(h.src)]
		}
	}
}

// dropWrittenHoles forgets holes that are fully written.
func (q *QP) dropWrittenHoles() {
	i := 0
	for i < len(q.holes) && q.holes[i].end() <= q.txoff {
		i++
	}
	if i > 0 {
		n := copy(q.holes, q.holes[i:])
		clear(q.holes[n:])
		q.holes = q.holes[:n]
	}
}

// gatherIov appends iovecs for txbuf[a:b], holes taken from their
// sources, to q.giov; it stops early (returning the end it reached) once
// max iovecs are there.
func (q *QP) gatherIov(a, b, max int) int {
	for _, h := range q.holes {
		if a >= b || len(q.giov) >= max {
			break
		}
		if h.end() <= a {
			continue
		}
		if h.start >= b {
			break
		}
		if a < h.start {
			q.giov = appendIovec(q.giov, q.txbuf[a:h.start])
			a = h.start
			if len(q.giov) >= max {
				break
			}
		}
		e := min(h.end(), b)
		q.giov = appendIovec(q.giov, h.src[a-h.start:e-h.start])
		a = e
	}
	if a < b && len(q.giov) < max {
		q.giov = appendIovec(q.giov, q.txbuf[a:b])
		a = b
	}
	return a
}

func appendIovec(v []unix.Iovec, b []byte) []unix.Iovec {
	var x unix.Iovec
	x.Base = &b[0]
	x.SetLen(len(b))
	return append(v, x)
}

// gatherBatchIov bounds the iovecs of one flushGather system call.
const gatherBatchIov = 4096

// flushGather is Flush while holes are queued: aligned, the records Flush
// would make (an FPDU, or a run of FPDUs that fill segments), each one
// message of iovecs, up to maxBatch of them in one sendmmsg; unaligned, up
// to maxIov iovecs in one sendmsg.
func (q *QP) flushGather() error {
	if cap(q.giov) < gatherBatchIov+maxIov {
		q.giov = make([]unix.Iovec, 0, gatherBatchIov+maxIov) // never grown below: mmsg points into it
	}
	b := getBatch()
	defer b.put()
	for q.txoff < len(q.txbuf) {
		q.giov = q.giov[:0]
		n := 0
		start, rec := q.txoff, q.recOff
		var ends [maxBatch]int // where each message ends
		var whole [maxBatch]bool
		for i, e := range q.txEnds {
			if n == maxBatch || len(q.giov) >= gatherBatchIov {
				break
			}
			if e <= start {
				continue
			}
			end := e
			if q.noAlign {
				end = len(q.txbuf)
			} else if q.runOn(rec, e) && i+1 < len(q.txEnds) {
				continue // whole segments so far: the record goes on
			}
			i0 := len(q.giov)
			reached := q.gatherIov(start, end, i0+maxIov)
			if reached < end && !q.noAlign {
				// The iovecs ran out inside the record, maybe inside an
				// FPDU. Ended there, the kernel would send the piece as a
				// short segment and the rest of the record would start
				// segments in the middle of FPDUs: end it at the last
				// whole FPDU instead, which in a run of FPDUs that fill
				// their segments lies on a segment boundary.
				if cut := q.lastFrameEndFrom(start, reached); cut > 0 {
					end = cut
					q.giov = q.giov[:i0]
					reached = q.gatherIov(start, end, i0+maxIov)
				}
			}
			b.mmsg[n].Hdr = unix.Msghdr{Iov: &q.giov[i0]}
			b.mmsg[n].Hdr.SetIovlen(len(q.giov) - i0)
			b.mmsg[n].Len = 0
			b.used = max(b.used, n+1)
			ends[n], whole[n] = reached, reached == end && !q.noAlign
			n++
			start, rec = reached, end
			if reached < end || q.noAlign {
				break // the rest of the record goes in the next call
			}
		}
		flags := q.sendFlags()
		if q.noAlign {
			flags = unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL
		}
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(q.fd), uintptr(unsafe.Pointer(&b.mmsg[0])), uintptr(n), flags, 0, 0)
		runtime.KeepAlive(q.holes)
		runtime.KeepAlive(q.txbuf)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			q.dropSentEnds()
			q.dropWrittenHoles()
			return e
		}
		short := false
		for i := 0; i < int(r); i++ {
			q.txoff += int(b.mmsg[i].Len)
			if q.txoff != ends[i] {
				short = true // the rest of this message follows in the next call
				break
			}
			if whole[i] {
				q.recOff = q.txoff
				q.records++
			}
		}
		q.dropWrittenHoles()
		if short || int(r) < n {
			q.dropSentEnds()
			q.retireResponses()
			return unix.EAGAIN
		}
	}
	q.txDone()
	return nil
}

// lastFrameEnd returns the end of the last frame not yet written that ends
// by txbuf offset at, or 0 when none does.
func (q *QP) lastFrameEnd(at int) int { return q.lastFrameEndFrom(q.txoff, at) }

// lastFrameEndFrom is lastFrameEnd for frames that end after from.
func (q *QP) lastFrameEndFrom(from, at int) int {
	cut := 0
	for _, e := range q.txEnds {
		if e > at {
			break
		}
		if e > from {
			cut = e
		}
	}
	return cut
}

// pendingWire returns a copy of the octets queued and not yet written, as
// they go on the wire (holes filled).
func (q *QP) pendingWire() []byte {
	q.giov = q.giov[:0]
	for a := q.txoff; a < len(q.txbuf); {
		a = q.gatherIov(a, len(q.txbuf), 1<<30)
	}
	var out []byte
	for _, v := range q.giov {
		out = append(out, unsafe.Slice(v.Base, v.Len)...)
	}
	return out
}

// PostWriteGather queues an RDMA Write of src to the peer's region stag at
// offset to, sent from src itself: src must not change until Flush has
// written it, or until Settle.
func (q *QP) PostWriteGather(stag STag, to uint64, src []byte) {
	if len(src) < gatherMin {
		q.postTagged(OpRDMAWrite, stag, to, [][]byte{src})
		return
	}
	q.postTaggedGather(OpRDMAWrite, stag, to, src)
}

// Settle copies into the transmit buffer whatever of buf is queued by
// gather and not yet written, so that the caller may change buf.
func (q *QP) Settle(buf []byte) {
	if len(q.holes) > 0 {
		q.fillHoles(buf)
	}
}
