package shm

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"unsafe"
)

// A ring's bytes: a control page and then its data, a power of two.
//
// The control page holds one 64-bit word per cache line, so that the
// producer's and the consumer's stores do not share a line:
//
//	offHead   producer: bytes of records published (grows, never wraps)
//	offTail   consumer: bytes of records consumed
//	offSleep  consumer: 1 while it sleeps or is about to (wake it after a publish)
//	offWant   producer: the room it waits for, in ring bytes (wake it once a release leaves that much)
//	offPrompt producer: nonzero once it has published, or is about to publish, records that the
//	          consumer should read as they come rather than leave behind others (urgent data)
//
// A record is an 8-byte header (the payload's length, uint64 little-endian)
// and the payload, padded to 8 bytes. Records start 8-aligned, so a
// header never wraps around the end of the data; a payload may.
const (
	ControlSize = 4096
	offHead     = 64
	offTail     = 128
	offSleep    = 192
	offWant     = 256
	offPrompt   = 320

	recHeader = 8
	recAlign  = 8

	// MinData and MaxData bound a ring's data size.
	MinData = 4096
	MaxData = 1 << 30
)

// Errors of the rings.
var (
	// ErrEmpty: no record is waiting.
	ErrEmpty = errors.New("shm: ring empty")
	// ErrFull: the record does not fit the room left now.
	ErrFull = errors.New("shm: ring full")
	// ErrTooBig: the record could never fit the ring.
	ErrTooBig = errors.New("shm: record larger than the ring")
	// ErrCorrupt: the peer's position or a record header is impossible.
	ErrCorrupt = errors.New("shm: peer corrupted the ring")
	// ErrSize: a ring's memory is not a control page and a power-of-two data area.
	ErrSize = errors.New("shm: bad ring size")
)

// ring is what both ends see of one ring's memory.
type ring struct {
	head, tail  *uint64
	sleep, want *uint64
	prompt      *uint64
	data        []byte
	mask        uint64
}

func newRing(mem []byte) (ring, error) {
	n := len(mem) - ControlSize
	if n < MinData || n > MaxData || n&(n-1) != 0 || uintptr(unsafe.Pointer(&mem[0]))%64 != 0 {
		return ring{}, ErrSize
	}
	word := func(off int) *uint64 { return (*uint64)(unsafe.Pointer(&mem[off])) }
	return ring{
		head: word(offHead), tail: word(offTail), sleep: word(offSleep), want: word(offWant),
		prompt: word(offPrompt),
		data:   mem[ControlSize:], mask: uint64(n - 1),
	}, nil
}

// RingBytes is the memory a ring with data bytes of data takes.
func RingBytes(data int) int { return ControlSize + data }

// recordLen is the ring space a record with n payload bytes takes.
func recordLen(n uint64) uint64 { return (recHeader + n + recAlign - 1) &^ (recAlign - 1) }

// MaxRecord is the largest payload one record of a ring with data bytes can carry.
func MaxRecord(data int) int { return data - recHeader }

// Producer writes records into a ring. One goroutine at a time.
type Producer struct {
	r    ring
	head uint64 // written, published up to pub
	pub  uint64
	tail uint64 // the consumer's position last read
	// ready: the data bytes from the ring's start that are backed by
	// memory (populate.go); the whole ring once its first lap is done.
	ready uint64
}

// NewProducer is the writing end of the ring in mem (RingBytes long),
// which starts empty.
func NewProducer(mem []byte) (*Producer, error) {
	r, err := newRing(mem)
	if err != nil {
		return nil, err
	}
	return &Producer{r: r}, nil
}

// readTail reads the consumer's position; it may only move forward, and
// never past what was published.
func (p *Producer) readTail() error {
	t := atomic.LoadUint64(p.r.tail)
	if t-p.tail > p.pub-p.tail { // backwards (wrapped) or past the published records
		return ErrCorrupt
	}
	p.tail = t
	return nil
}

// Room is the largest payload a record appended now can carry.
func (p *Producer) Room() (int, error) {
	if err := p.readTail(); err != nil {
		return 0, err
	}
	free := uint64(len(p.r.data)) - (p.head - p.tail) // a multiple of recAlign
	if free < recHeader {
		return 0, nil
	}
	return int(free - recHeader), nil
}

// Append writes one record, the concatenation of parts, unpublished until
// Publish. ErrFull: not now (nothing written); ErrTooBig: never.
func (p *Producer) Append(parts ...[]byte) error {
	n := uint64(0)
	for _, b := range parts {
		n += uint64(len(b))
	}
	size := uint64(len(p.r.data))
	rl := recordLen(n)
	if rl > size {
		return ErrTooBig
	}
	if size-(p.head-p.tail) < rl {
		if err := p.readTail(); err != nil {
			return err
		}
		if size-(p.head-p.tail) < rl {
			return ErrFull
		}
	}
	at := p.head & p.r.mask
	if p.ready < size {
		p.populate(p.head + rl)
	}
	binary.LittleEndian.PutUint64(p.r.data[at:], n)
	at = (at + recHeader) & p.r.mask
	for _, b := range parts {
		c := copy(p.r.data[at:], b)
		if c < len(b) {
			copy(p.r.data, b[c:])
		}
		at = (at + uint64(len(b))) & p.r.mask
	}
	p.head += rl
	return nil
}

// Unpublished reports whether records wait for Publish.
func (p *Producer) Unpublished() bool { return p.head != p.pub }

// Publish makes the appended records visible to the consumer. It reports
// whether the consumer sleeps and must be woken (the flag is cleared:
// one wake per sleep).
func (p *Producer) Publish() (wake bool) {
	if p.head == p.pub {
		return false
	}
	p.pub = p.head
	atomic.StoreUint64(p.r.head, p.head)
	// Sequentially consistent store then load, against the consumer's
	// store of the flag then load of head (Sleep): one of the two sees
	// the other.
	return atomic.LoadUint64(p.r.sleep) != 0 && atomic.CompareAndSwapUint64(p.r.sleep, 1, 0)
}

// WaitRoom announces that the producer will sleep until the consumer
// has released room for a record of need payload bytes (at most
// MaxRecord): the consumer wakes it once, when there is, not at every
// release (a producer that waited for any room would be woken for every
// record read, each wake-up a system call at both ends). It reports false
// when the room came meanwhile (the producer goes on and the announcement
// is withdrawn); true: sleep until woken, then call Room or Append again.
func (p *Producer) WaitRoom(need int) (bool, error) {
	need = min(max(need, 0), MaxRecord(len(p.r.data)))
	atomic.StoreUint64(p.r.want, recordLen(uint64(need)))
	room, err := p.Room()
	if err != nil || room >= need {
		atomic.StoreUint64(p.r.want, 0)
		return false, err
	}
	return true, nil
}

// Prompt tells the consumer, from the records published after it on,
// not to leave records unread behind others (Consumer.Prompted): one
// will matter to its reader before the ones in front of it are read.
// It stays set; the records it is for must be published after it.
func (p *Producer) Prompt() { atomic.StoreUint64(p.r.prompt, 1) }

// Idle reports whether everything published has been consumed: then the
// consumer reads nothing of the data until the next Publish, and the
// producer, its only writer, may give its pages back (Region.Trim).
func (p *Producer) Idle() (bool, error) {
	if err := p.readTail(); err != nil {
		return false, err
	}
	return p.head == p.pub && p.tail == p.pub, nil
}

// TrimUnread gives back the data pages that hold no record the consumer
// has still to read: all of them once it has read everything, otherwise
// all but those around the unread records (a quiet connection's last
// credit updates, which its peer reads at its next call). Only between
// writes: the producer, the ring's only writer, writes nothing meanwhile,
// and the consumer reads only what was published and not consumed, which
// can only shrink. Pages given back read as zeros and come back as they
// are written, faulted in one at a time: populating ahead (populate.go)
// counts from the first lap's start and is over.
func (p *Producer) TrimUnread() error {
	if err := p.readTail(); err != nil {
		return err
	}
	if p.head != p.pub {
		return errors.New("shm: TrimUnread with records appended and not published")
	}
	size := uint64(len(p.r.data))
	p.ready = size
	if p.head == p.tail {
		return removePages(p.r.data)
	}
	keepFrom := p.tail &^ (pageSize - 1)
	keepTo := (p.head + pageSize - 1) &^ (pageSize - 1)
	if keepTo-keepFrom >= size {
		return nil
	}
	from, n := keepTo&p.r.mask, size-(keepTo-keepFrom)
	if from+n <= size {
		return removePages(p.r.data[from : from+n])
	}
	if err := removePages(p.r.data[from:]); err != nil {
		return err
	}
	return removePages(p.r.data[:from+n-size])
}

// Consumer reads records from a ring. One goroutine at a time.
type Consumer struct {
	r    ring
	tail uint64 // read, released up to rel
	rel  uint64
	head uint64 // the producer's position last read
	// A record Read has begun: its payload's next byte (at), the bytes
	// of it left, and where the record ends (tail moves there once it
	// is all read, so that the producer cannot reuse its space before).
	at, left, end uint64
}

// NewConsumer is the reading end of the ring in mem (RingBytes long).
func NewConsumer(mem []byte) (*Consumer, error) {
	r, err := newRing(mem)
	if err != nil {
		return nil, err
	}
	return &Consumer{r: r}, nil
}

// readHead reads the producer's position: forward only, and never more
// than the ring holds ahead of what was released.
func (c *Consumer) readHead() error {
	h := atomic.LoadUint64(c.r.head)
	if h-c.head > uint64(len(c.r.data))-(c.head-c.rel) {
		return ErrCorrupt
	}
	c.head = h
	return nil
}

// Pending reports whether a record waits (without taking it).
func (c *Consumer) Pending() (bool, error) {
	if c.tail != c.head {
		return true, nil
	}
	if err := c.readHead(); err != nil {
		return false, err
	}
	return c.tail != c.head, nil
}

// Next appends the next record's payload to dst and returns it. The
// record's space stays the consumer's until Release. The payload is copied
// before anything reads it: the producer cannot change it afterwards.
func (c *Consumer) Next(dst []byte) ([]byte, error) {
	hdr, err := c.header()
	if err != nil {
		return dst, err
	}
	n := int(hdr)
	at := (c.tail + recHeader) & c.r.mask
	first := len(c.r.data) - int(at)
	if first > n {
		first = n
	}
	dst = append(dst, c.r.data[at:int(at)+first]...)
	dst = append(dst, c.r.data[:n-first]...)
	c.tail += recordLen(hdr)
	return dst, nil
}

// header returns the payload length of the record at tail, checked
// against what the producer published: ErrEmpty when there is none,
// ErrCorrupt when it cannot be a record.
func (c *Consumer) header() (uint64, error) {
	hdr, end, err := c.headerAt(c.tail)
	if err != nil {
		return 0, err
	}
	if end == 0 {
		return 0, ErrEmpty
	}
	return hdr, nil
}

// Release gives the space of the records read back to the producer. It
// reports whether the producer waits for room and must be woken.
func (c *Consumer) Release() (wake bool) {
	if c.tail == c.rel {
		return false
	}
	c.rel = c.tail
	atomic.StoreUint64(c.r.tail, c.tail)
	// Sequentially consistent store then load, against WaitRoom's store
	// of what it wants then load of tail. The room counts what the
	// producer has published since, too: a stale view would only wake it
	// early, a hostile one only costs this connection its wake-ups. Once
	// everything is read the room is the whole ring, which any want fits.
	want := atomic.LoadUint64(c.r.want)
	if want == 0 {
		return false
	}
	free := uint64(len(c.r.data)) - (atomic.LoadUint64(c.r.head) - c.tail)
	return free >= want && atomic.CompareAndSwapUint64(c.r.want, want, 0)
}

// Prompted reports whether the producer has asked for its records to be
// read as they come (Producer.Prompt). Only a hint: a producer that lies
// costs its own connection the reads it left for later.
func (c *Consumer) Prompted() bool { return atomic.LoadUint64(c.r.prompt) != 0 }

// Sleep announces that the consumer will sleep until the producer
// publishes. It reports false when a record came meanwhile (the consumer
// goes on, the flag is cleared); true: sleep until woken.
func (c *Consumer) Sleep() (bool, error) {
	atomic.StoreUint64(c.r.sleep, 1)
	more, err := c.Pending()
	if err != nil || more {
		atomic.StoreUint64(c.r.sleep, 0)
		return false, err
	}
	return true, nil
}

// Awake withdraws Sleep's announcement, for a consumer that woke for
// another reason than the producer's wake-up (a signal, a timeout).
func (c *Consumer) Awake() { atomic.StoreUint64(c.r.sleep, 0) }
