package shm

import "encoding/binary"

// The rings as a byte stream, for a framing of its own above them (the
// iWARP framing of SDP's messages): a write is one record of as many bytes
// as fit, and reads take the payloads in order across record boundaries.

// Write appends one record of as much of b as fits now and returns how
// much; unpublished until Publish. ErrFull: no room at all.
func (p *Producer) Write(b []byte) (int, error) {
	room, err := p.Room()
	if err != nil {
		return 0, err
	}
	if room == 0 && len(b) > 0 {
		return 0, ErrFull
	}
	n := min(len(b), room)
	if err := p.Append(b[:n]); err != nil {
		return 0, err
	}
	return n, nil
}

// Read copies the payloads of the records in order into b, as a byte
// stream: a record longer than b is read across calls, and its space is
// released (Release) only once it is all read. ErrEmpty: nothing to read.
func (c *Consumer) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if c.left == 0 {
			ok, err := c.begin()
			if err != nil {
				return n, err
			}
			if !ok {
				break
			}
			continue
		}
		at := c.at & c.r.mask
		k := copy(b[n:min(len(b), n+int(c.left))], c.r.data[at:])
		n += k
		c.at += uint64(k)
		c.left -= uint64(k)
		if c.left == 0 {
			c.tail = c.end
		}
	}
	if n == 0 && len(b) > 0 {
		return 0, ErrEmpty
	}
	return n, nil
}

// begin starts the next record for Read (its header checked as Next
// checks it); a record without payload is passed over at once. It reports
// whether there was one.
func (c *Consumer) begin() (bool, error) {
	hdr, err := c.header()
	if err == ErrEmpty {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.at, c.left, c.end = c.tail+recHeader, hdr, c.tail+recordLen(hdr)
	if hdr == 0 {
		c.tail = c.end
	}
	return true, nil
}

// Holds reports whether Read would take at least n bytes now.
func (c *Consumer) Holds(n int) (bool, error) {
	got := c.left
	next := c.end
	if c.left == 0 {
		next = c.tail
	}
	for got < uint64(n) {
		hdr, end, err := c.headerAt(next)
		if err != nil || end == 0 {
			return false, err
		}
		got += hdr
		next = end
	}
	return true, nil
}

// headerAt is header for the record at pos, at or after tail: its payload
// length and where it ends, or end 0 when nothing is published there yet.
func (c *Consumer) headerAt(pos uint64) (hdr, end uint64, err error) {
	if pos == c.head {
		if err := c.readHead(); err != nil {
			return 0, 0, err
		}
		if pos == c.head {
			return 0, 0, nil
		}
	}
	avail := c.head - pos
	if avail < recHeader || avail%recAlign != 0 || avail > uint64(len(c.r.data)) {
		return 0, 0, ErrCorrupt
	}
	hdr = binary.LittleEndian.Uint64(c.r.data[pos&c.r.mask:])
	if hdr > avail || recordLen(hdr) > avail {
		return 0, 0, ErrCorrupt
	}
	return hdr, pos + recordLen(hdr), nil
}
