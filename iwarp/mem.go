package iwarp

import (
	"fmt"
	"math/rand/v2"
)

// Memory protection (RFC 5040 §7.2; RFC 5041 §7.1, §7.2).
//
// A peer may only place data into, or read data from, memory that this side
// registered and told it about. Registration returns an STag: a 24-bit index
// into the region table and an 8-bit key, the way RNICs and Linux siw build
// them (index << 8 | key). The key is drawn at random on every registration
// and never repeats the key the slot had before, so an STag that names a
// region which was invalidated, or a guessed STag, does not match. Regions
// are zero-based: the Tagged Offset is the byte offset inside the region.
//
// Every tagged placement and every Read Request is checked against the
// region before a byte moves: the STag must be valid (index known, key
// equal, not invalidated), the access right present, and [TO, TO+len) inside
// the region without wrapping. A failed check is an *Error classified as a
// Terminate carries it; nothing is written.

// Access is a set of rights on a registered region.
type Access uint8

// Access rights. Local write is what a Read Response needs in the
// requester's sink; the remote rights are what the peer's RDMA Write, Read
// Request and Send with Invalidate need.
const (
	AccessLocalWrite Access = 1 << iota
	AccessRemoteWrite
	AccessRemoteRead
	AccessRemoteInvalidate
)

func (a Access) String() string {
	s := ""
	for _, r := range [...]struct {
		a    Access
		name string
	}{{AccessLocalWrite, "LocalWrite"}, {AccessRemoteWrite, "RemoteWrite"}, {AccessRemoteRead, "RemoteRead"}, {AccessRemoteInvalidate, "RemoteInvalidate"}} {
		if a&r.a != 0 {
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

// STag names a registered region: index (24 bits) << 8 | key (8 bits).
type STag uint32

// Index is the region table slot the STag names.
func (s STag) Index() uint32 { return uint32(s) >> 8 }

// Key is the STag's 8 random key bits.
func (s STag) Key() uint8 { return uint8(s) }

func (s STag) String() string { return fmt.Sprintf("%#08x", uint32(s)) }

// maxRegions bounds the table: index 0 is never used (so STag 0, which an
// untagged header carries when it names no STag, is never valid), and the
// index has 24 bits.
const maxRegions = 1<<24 - 1

// region is one slot of the table.
type region struct {
	buf    []byte
	access Access
	key    uint8
	valid  bool
}

// MemTable holds the regions a QP's peer may access. Slots of invalidated
// regions are reused oldest first, each time with a fresh key.
type MemTable struct {
	regions []region // index i+1 is regions[i]
	free    []uint32 // indexes of invalidated slots, oldest first
	valid   int
	// invalidated, if set, is told of every invalidation before it
	// returns (the QP stops a direct placement into that region).
	invalidated func(STag)
}

// ErrTooManyRegions reports that the table is full.
var ErrTooManyRegions = fmt.Errorf("iwarp: more than %d registered regions", maxRegions)

// Register makes buf accessible with the given rights and returns its STag.
// The table keeps buf (not a copy): placements write into it and Read
// Responses read from it until Invalidate.
func (t *MemTable) Register(buf []byte, access Access) (STag, error) {
	var idx uint32
	if len(t.free) > 0 && (len(t.free) > 64 || len(t.regions) == maxRegions) {
		// Reuse only once enough slots wait, so that a slot is reused long
		// after it was invalidated: a stale STag then meets a new key after
		// many other registrations, not right away.
		idx = t.free[0]
		t.free = t.free[1:]
	} else if len(t.regions) < maxRegions {
		t.regions = append(t.regions, region{key: uint8(rand.Uint32())})
		idx = uint32(len(t.regions))
	} else {
		return 0, ErrTooManyRegions
	}
	r := &t.regions[idx-1]
	old := r.key
	key := uint8(rand.Uint32())
	for key == old {
		key = uint8(rand.Uint32())
	}
	*r = region{buf: buf, access: access, key: key, valid: true}
	t.valid++
	return STag(idx<<8 | uint32(key)), nil
}

// lookup returns the valid region an STag names, or nil.
func (t *MemTable) lookup(s STag) *region {
	i := s.Index()
	if i == 0 || int(i) > len(t.regions) {
		return nil
	}
	r := &t.regions[i-1]
	if !r.valid || r.key != s.Key() {
		return nil
	}
	return r
}

// Invalidate ends access through s: later placements and reads that name it
// fail, and the table drops its reference to the buffer. It reports whether
// s was valid.
func (t *MemTable) Invalidate(s STag) bool {
	r := t.lookup(s)
	if r == nil {
		return false
	}
	r.valid = false
	r.buf = nil
	t.valid--
	t.free = append(t.free, s.Index())
	if t.invalidated != nil {
		t.invalidated(s)
	}
	return true
}

// Valid reports whether s names a registered region.
func (t *MemTable) Valid(s STag) bool { return t.lookup(s) != nil }

// Len is the number of valid regions.
func (t *MemTable) Len() int { return t.valid }

// Region returns the buffer s names and its rights, if s is valid.
func (t *MemTable) Region(s STag) ([]byte, Access, bool) {
	r := t.lookup(s)
	if r == nil {
		return nil, 0, false
	}
	return r.buf, r.access, true
}

// accessFault is why a check failed, before it is classified for a layer.
type accessFault uint8

const (
	faultNone accessFault = iota
	faultSTag
	faultRights
	faultBounds
	faultWrap
)

// check finds the bytes [to, to+n) of the region s names, if s allows
// need. The returned slice is exactly n bytes of the region.
func (t *MemTable) check(s STag, to uint64, n int, need Access) ([]byte, accessFault) {
	r := t.lookup(s)
	if r == nil {
		return nil, faultSTag
	}
	if r.access&need != need {
		return nil, faultRights
	}
	end := to + uint64(n)
	if end < to {
		return nil, faultWrap
	}
	if end > uint64(len(r.buf)) {
		return nil, faultBounds
	}
	return r.buf[to:end:end], faultNone
}

// placementErr classifies a failed check of a tagged segment (RDMA Write or
// Read Response) as RFC 5041 §7.2 tagged buffer errors, except a missing
// right, for which only RDMAP has a code (RFC 5040 §4.8, remote protection
// error, access rights violation).
func placementErr(f accessFault, op Opcode, s STag, to uint64, n int) *Error {
	switch f {
	case faultRights:
		return rdmapErr(RDMAPErrTypeProtection, RDMAPErrAccessRights, "%v to STag %v: the region does not allow it", op, s)
	case faultBounds:
		return ddpErr(DDPErrTypeTagged, DDPErrBaseBounds, "%v of %d octets at TO %d is outside the region of STag %v", op, n, to, s)
	case faultWrap:
		return ddpErr(DDPErrTypeTagged, DDPErrTOWrap, "%v of %d octets at TO %#x wraps", op, n, to)
	}
	return ddpErr(DDPErrTypeTagged, DDPErrInvalidSTag, "%v names STag %v, which is not valid", op, s)
}

// readSourceErr classifies a failed check of a Read Request's source as RFC
// 5040 §4.8 remote protection errors: the request is an RDMAP message, and
// RDMAP answers for it.
func readSourceErr(f accessFault, s STag, to uint64, n uint32) *Error {
	switch f {
	case faultRights:
		return rdmapErr(RDMAPErrTypeProtection, RDMAPErrAccessRights, "Read Request from STag %v: the region does not allow remote reads", s)
	case faultBounds:
		return rdmapErr(RDMAPErrTypeProtection, RDMAPErrBaseBounds, "Read Request of %d octets at TO %d is outside the region of STag %v", n, to, s)
	case faultWrap:
		return rdmapErr(RDMAPErrTypeProtection, RDMAPErrTOWrap, "Read Request of %d octets at TO %#x wraps", n, to)
	}
	return rdmapErr(RDMAPErrTypeProtection, RDMAPErrInvalidSTag, "Read Request names source STag %v, which is not valid", s)
}
