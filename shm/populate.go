package shm

import "golang.org/x/sys/unix"

// populateStep is how much of a fresh ring the producer backs with memory
// at a time, ahead of its writes.
//
// A connection's region is a fresh memfd, so the first lap through a ring
// meets pages that do not exist yet. Faulted in one by one as the copy
// reaches them, 1 MiB cost 330-520 us here; madvise(MADV_POPULATE_WRITE)
// backs the same pages in one call for about 230 us (a C program, fresh
// memfd each time). Only the first lap pays either: the producer is the
// ring's only writer and its pages stay until the region goes.
const populateStep = 128 << 10

// populateFrom: a ring is populated ahead only once its writes reach past
// this offset. A connection that carries less (most of a server's, and an
// idle one's) keeps only the pages it wrote, as before.
const populateFrom = 64 << 10

// populate backs the ring's data with memory up to at least end (a ring
// position of the record about to be written), a step at a time. A kernel
// without MADV_POPULATE_WRITE (before 5.14), or one that refuses it, leaves
// the pages to fault in as before.
func (p *Producer) populate(end uint64) {
	size := uint64(len(p.r.data))
	if end > size {
		// The record wraps: the rest of the first lap, and the ring's
		// start, which the earlier steps backed, takes the remainder.
		end = size
	}
	if end <= p.ready || end <= populateFrom {
		return
	}
	to := min(size, max(end, p.ready+populateStep)+pageSize-1) &^ (pageSize - 1)
	if err := unix.Madvise(p.r.data[p.ready:to], unix.MADV_POPULATE_WRITE); err != nil {
		p.ready = size // faults as usual
		return
	}
	p.ready = to
}

// pageSize is the page size rings are aligned to (ControlSize).
const pageSize = ControlSize
