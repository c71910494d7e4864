package iwarp

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A QP carries RDMAP messages over one kernel TCP socket in one process.
//
// Transmit: the caller posts messages; each is cut into DDP segments that fit
// the MULPDU, framed into FPDUs (markers, pad, CRC) straight into the
// transmit buffer, and written to the socket by Flush with MSG_DONTWAIT.
// Nothing here blocks: a socket that cannot take more leaves bytes queued and
// Flush reports unix.EAGAIN.
//
// Receive: Fill reads whatever the socket holds into a chunk buffer;
// NextSegment deframes one FPDU in place (CRC checked before anything is
// returned), parses its DDP/RDMAP headers and checks untagged sequencing
// (MSN, MO, Last). The payload of a returned segment aliases the chunk; the
// caller holds it until it calls Segment.Release, so a chunk is reused only
// once nothing points into it. NextMessage joins untagged segments into
// whole messages (message.go). The rest of a large tagged FPDU is read
// straight into its registered region (direct.go).
//
// A QP is not safe for concurrent use; its owner serialises calls.
type QP struct {
	fd       int
	stream   ByteStream   // carries the FPDUs instead of fd (stream.go)
	holder   HoldStream   // stream, when it says what it holds (sink.go)
	recorder RecordStream // stream, when it takes records (streamtx.go)
	dhdr     [ulpduLenLen + DDPUntaggedHeaderLen]byte
	txDirect uint64
	choice   StreamChoice           // a stream the peer has yet to take or decline (stream.go)
	imm      [ImmediateDataLen]byte // PostImmediate's payload while it is framed
	rawEnd   int                    // txbuf before it still goes to fd (stream.go)
	noAlign  bool                   // let the kernel merge FPDUs into segments (faster, unaligned)
	tx       *TxFramer
	rx       *RxDeframer
	full     bool
	mulpdu   int
	emss     int  // the TCP segment size FPDUs are cut for
	runs     bool // FPDUs fill segments exactly and go out in runs (segmentFit)
	local    int8 // the peer is on this host (PeerLocal): 1 yes, -1 no, 0 not known yet

	txbuf   []byte
	txoff   int
	txEnds  []int  // end offset in txbuf of each frame (FPDU or MPA frame)
	recOff  int    // txbuf offset where the record being written began (Flush)
	records uint64 // records (sendmmsg messages) written whole

	cur      *RxChunk // chunk being filled and parsed
	rxr, rxw int      // unparsed bytes are cur.buf[rxr:rxw]
	bulk     bool     // the last read filled its room: read into large chunks
	drained  bool     // the last read took less than its room: the socket was empty
	empty    uint64   // reads that found the socket empty (EAGAIN)
	eof      bool

	sendMSN [numQueues]uint32
	recvMSN [numQueues]uint32
	recvMO  [numQueues]uint32
	inMsg   [numQueues]bool

	scratch [][]byte
	hdr     [DDPUntaggedHeaderLen]byte

	last      lastSend // the last message queued, if AppendSend may grow it
	appendBuf []byte

	reasm      [numQueues]reasm // untagged messages being reassembled (message.go)
	maxRecvMsg int

	expectRTR RTRType // RTR message still awaited (rtr.go)
	rtrSeg    bool    // the segment being handled is that RTR

	// Gather (txgather.go): holes of txbuf sent from registered memory.
	holes      []hole
	giov       []unix.Iovec
	sealHoles  []Hole
	gparts     [2][]byte
	gathered   uint64
	holeCopied uint64

	rdma        // memory regions, RDMA Read state, completions, faults (rdma.go)
	direct      // tagged payload read straight into its region (direct.go)
	sink   sink // Send payload read straight into the reader's buffer (sink.go)
}

const (
	numQueues      = 3
	rxSmallChunk   = 16 << 10
	rxSmallMinRead = 2 << 10
	rxChunkSize    = 256 << 10
	rxMinRead      = 64 << 10
	maxULPDULength = 65535
	txShrinkAbove  = 4 << 20
	maxBatch       = 64
)

// ErrClosed reports that the peer closed its TCP stream.
var ErrClosed = errors.New("iwarp: connection closed by peer")

// NewQP returns a queue pair on the connected socket fd. It starts in the
// MPA negotiation phase: raw bytes only, until StartFullOperation.
func NewQP(fd int) *QP {
	q := &QP{fd: fd}
	q.ird, q.ord = DefaultIRD, DefaultORD
	q.mem.invalidated = q.divertDirect
	for i := range q.sendMSN {
		q.sendMSN[i] = 1
		q.recvMSN[i] = 1
	}
	return q
}

// Fd returns the socket the QP uses.
func (q *QP) Fd() int { return q.fd }

// SetFd moves the QP to another descriptor of the same socket (a dup).
func (q *QP) SetFd(fd int) {
	q.fd = fd
	if q.stream != nil {
		q.stream.SetFd(fd)
	}
}

// PeerLocal says whether the QP's peer is on this host (SameHost of its
// socket), asked of the kernel once, unless SetPeerLocal said it first.
func (q *QP) PeerLocal() bool {
	if q.local == 0 {
		q.SetPeerLocal(SameHost(q.fd))
	}
	return q.local > 0
}

// SetPeerLocal tells the QP whether its peer is on this host, for a caller
// that knows from the addresses it already has (the accepting side's
// Hello): two system calls fewer per connection.
func (q *QP) SetPeerLocal(local bool) {
	q.local = -1
	if local {
		q.local = 1
	}
}

// WriteRaw queues bytes outside FPDU framing (MPA Request/Reply).
func (q *QP) WriteRaw(b []byte) {
	q.last.ok = false
	q.txbuf = append(q.txbuf, b...)
	q.txEnds = append(q.txEnds, len(q.txbuf))
}

// Raw returns the received bytes not yet consumed, for MPA negotiation.
func (q *QP) Raw() []byte {
	if q.cur == nil {
		return nil
	}
	return q.cur.buf[q.rxr:q.rxw]
}

// ConsumeRaw drops n bytes from the front of Raw.
func (q *QP) ConsumeRaw(n int) { q.rxr += n }

// StartFullOperation switches both directions to FPDU framing. The marker
// origin of each direction is the first octet after that direction's MPA
// frame, which is exactly where framing starts now. mss is the connection's
// TCP maximum segment size, from which the MULPDU follows; 0 (or less) reads
// it from the socket (TCP_MAXSEG), and 536, TCP's default, when the kernel
// says less or nothing.
func (q *QP) StartFullOperation(txMarkers, rxMarkers, crc bool, spacing, mss int) {
	sock := SocketMSS(q.fd) // read once: a system call per connection
	if mss <= 0 {
		mss = max(sock, 536)
	}
	// Each FPDU is a whole message the peer may be waiting for: Nagle's
	// delay would only hold it back (RFC 5044 §5.1 names TCP_NODELAY as the
	// way to start segments with FPDUs).
	_ = unix.SetsockoptInt(q.fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	q.tx = NewTxFramer(txMarkers, crc, spacing)
	q.rx = NewRxDeframer(rxMarkers, crc, spacing)
	q.mulpdu = q.tx.MULPDU(mss)
	if q.noAlign {
		// FPDUs that need not start segments need not fit one either: a
		// 1500-octet MTU's would cut a 64 KiB message into 46 FPDUs, each
		// framed, checked and handed up alone (docs/PERFORMANCE.md).
		q.mulpdu = q.tx.MULPDU(unalignedSegment)
	}
	if q.mulpdu > maxULPDULength {
		q.mulpdu = maxULPDULength
	}
	q.emss = mss
	// Only for a segment size the kernel itself uses, and only a small one:
	// a large one (loopback's) may still grow once the peer's window has
	// (TCP_MAXSEG right after the handshake is at most half of it), and an
	// FPDU of that size is already one large buffer for the kernel.
	q.runs = mss%4 == 0 && mss <= maxRunSegment && mss == sock
	q.full = true
	switch {
	case q.stream != nil:
		q.startStream()
	case q.choice != nil:
		q.rawEnd = len(q.txbuf) // FPDUs wait for the peer's choice
	}
}

// unalignedSegment is the segment an unaligned FPDU is cut to fit: the
// largest the 16-bit ULPDU_Length allows.
const unalignedSegment = 1 << 16

// maxRunSegment is the largest segment size (jumbo frames and below, a
// real MTU) for which FPDUs are cut to fill segments and sent in runs.
const maxRunSegment = 16 << 10

// MULPDU returns the largest ULPDU this QP puts into one FPDU.
func (q *QP) MULPDU() int { return q.mulpdu }

// segmentFit returns the longest ULPDU for the next FPDU: one whose FPDU is
// exactly one TCP segment long at the current stream position when FPDUs are
// aligned, runs apply (StartFullOperation) and there is one, else the MULPDU. The MULPDU assumes the most
// markers a segment can hold; where fewer fall, the exact fit carries up to
// a marker's octets more. FPDUs that fill their segment exactly can be
// handed to the kernel together (Flush) and still start every segment.
func (q *QP) segmentFit() int {
	w := q.emss
	if q.noAlign || !q.runs || w-ulpduLenLen-crcLen > q.tx.maxULPDU {
		return q.mulpdu
	}
	// With m markers, ULPDU w-6-4m needs no PAD and makes the FPDU w long.
	for u := w - ulpduLenLen - crcLen; u > q.mulpdu; u -= MarkerLen {
		if q.tx.WireLen(u) == w {
			return u
		}
	}
	return q.mulpdu
}

// TxStats and RxStats report the framing counters.
func (q *QP) TxStats() TxStats {
	if q.tx == nil {
		return TxStats{}
	}
	return q.tx.Stats()
}

// TxRecords returns the number of records (runs of FPDUs ending in one
// MSG_EOR) written whole since the QP began.
func (q *QP) TxRecords() uint64 { return q.records }

// RxStats reports the deframing counters.
func (q *QP) RxStats() RxStats {
	if q.rx == nil {
		return RxStats{}
	}
	return q.rx.Stats()
}

// PostSend queues an untagged RDMAP message (Send family) on QN 0 whose
// payload is the concatenation of parts.
func (q *QP) PostSend(op Opcode, parts ...[]byte) {
	q.postUntagged(op, 0, 0, parts)
}

func (q *QP) postUntagged(op Opcode, qn uint32, invSTag uint32, parts [][]byte) {
	msn := q.sendMSN[qn]
	q.sendMSN[qn]++
	start, pos, frames, direct := len(q.txbuf), q.tx.Pos(), len(q.txEnds), q.txDirect
	q.post(segHeader{ctrl: RDMAPCtrl(op), inv: invSTag, qn: qn, msn: msn}, parts)
	// A Send that fits one FPDU may still grow (AppendSend); not one of
	// whose FPDUs went straight into the stream.
	q.last = lastSend{ok: (op == OpSend || op == OpSendSE) && len(q.txEnds) == frames+1 && q.txDirect == direct, start: start, pos: pos}
}

// postTagged queues a tagged RDMAP message (RDMA Write or Read Response)
// that places the concatenation of parts at stag, starting at offset to.
func (q *QP) postTagged(op Opcode, stag STag, to uint64, parts [][]byte) {
	q.last.ok = false
	q.post(segHeader{tagged: true, ctrl: RDMAPCtrl(op), stag: uint32(stag), to: to}, parts)
}

// segHeader is what the DDP headers of one message's segments share; each
// segment adds its offset (MO, or to TO) and the Last flag.
type segHeader struct {
	tagged       bool
	ctrl         uint8
	inv, qn, msn uint32
	stag         uint32
	to           uint64
}

// encode writes into dst the DDP header of the segment of h at payload
// offset mo.
func (h *segHeader) encode(dst []byte, last bool, mo int) {
	if h.tagged {
		EncodeTaggedHeader(dst, last, h.ctrl, h.stag, h.to+uint64(mo))
	} else {
		EncodeUntaggedHeader(dst, last, h.ctrl, h.inv, h.qn, h.msn, uint32(mo))
	}
}

// appendParts appends to seg the next n payload octets of parts, from
// parts[pi][po:] on, and returns seg and the position after them.
func appendParts(seg, parts [][]byte, pi, po, n int) ([][]byte, int, int) {
	for n > 0 {
		p := parts[pi][po:]
		if len(p) > n {
			p = p[:n]
		}
		if len(p) > 0 {
			seg = append(seg, p)
		}
		n -= len(p)
		po += len(p)
		if po == len(parts[pi]) {
			pi, po = pi+1, 0
		}
	}
	return seg, pi, po
}

// post cuts one message into DDP segments that fit the MULPDU and frames
// each into the transmit buffer. A zero-length message is one segment.
func (q *QP) post(h segHeader, parts [][]byte) {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	hl := DDPUntaggedHeaderLen
	if h.tagged {
		hl = DDPTaggedHeaderLen
	}
	mo, pi, po := q.postDirect(h, parts, total, hl) // position in parts
	if mo > 0 && mo == total {
		return
	}
	q.reserveTx(total-mo, hl)
	for {
		n := min(total-mo, q.segmentFit()-hl)
		last := mo+n == total
		h.encode(q.hdr[:], last, mo)
		var seg [][]byte
		seg, pi, po = appendParts(append(q.scratch[:0], q.hdr[:hl]), parts, pi, po, n)
		q.txbuf = q.tx.AppendFPDU(q.txbuf, seg...)
		q.txEnds = append(q.txEnds, len(q.txbuf))
		for i := range seg {
			seg[i] = nil
		}
		q.scratch = seg[:0]
		mo += n
		if last {
			return
		}
	}
}

// reserveTx makes room in the transmit buffer for a message of total
// payload octets in one allocation: grown FPDU by FPDU, a message of
// megabytes (a Read Response) would copy the buffer over and over.
func (q *QP) reserveTx(total, hl int) {
	if total < 1<<16 {
		return
	}
	segs := total/max(q.mulpdu-hl, 1) + 1
	wire := total + segs*(hl+ulpduLenLen+3+crcLen+MarkerLen)
	if q.tx.markers {
		wire += (wire/q.tx.spacing + 1) * MarkerLen
	}
	if cap(q.txbuf)-len(q.txbuf) >= wire {
		return
	}
	if len(q.txbuf) == 0 {
		if b, ok := txPool.Get().(*[]byte); ok && cap(*b) >= wire {
			q.txbuf = (*b)[:0]
			return
		}
	}
	b := make([]byte, len(q.txbuf), len(q.txbuf)+wire)
	q.txbuf = b[:copy(b, q.txbuf)]
}

// txPool keeps transmit buffers too large for an idle QP to hold (over
// txShrinkAbove) for the next large message of any QP of the process: a
// stream of 4 MiB zero-copy sends reuses one instead of faulting in a
// fresh one per message. The garbage collector empties the pool.
var txPool sync.Pool

// lastSend locates the last queued message when it is a Send in one FPDU.
type lastSend struct {
	ok    bool
	start int    // its offset in txbuf; it runs to the end of txbuf
	pos   uint64 // the transmit stream position it was framed at
}

// AppendSend grows the last queued message by the concatenation of parts,
// when that message is a Send (or Send with SE) that fits one FPDU, no octet
// of it has been written yet, and it still fits one FPDU afterwards: the
// FPDU is framed again in place with the longer ULPDU, under the same MSN,
// so the peer sees one message (coalescing by appending to a queued send:
// Balaji, Bhagvat, Thakur and Panda, "Sockets Direct Protocol for Hybrid
// Network Stacks: A Case Study with iWARP over 10G Ethernet", §4.2). edit, if
// not nil, sees the whole new payload before it is framed, so the upper layer
// can fix its own header (SDP's BSDH Len). It reports whether it appended; if
// not, nothing changed.
func (q *QP) AppendSend(edit func(payload []byte), parts ...[]byte) bool {
	l := &q.last
	if !l.ok || q.txoff > l.start {
		return false
	}
	add := 0
	for _, p := range parts {
		add += len(p)
	}
	fr := q.txbuf[l.start:]
	hdr := 0
	if q.tx.markers && l.pos%uint64(q.tx.spacing) == 0 {
		hdr = MarkerLen
	}
	ulen := int(binary.BigEndian.Uint16(fr[hdr:]))
	if ulen+add > q.mulpdu {
		return false
	}
	d := RxDeframer{framing: q.tx.framing}
	d.pos, d.maxULPDU = l.pos, maxULPDULen
	ulpdu, n, err := d.Next(fr)
	if err != nil || n != len(fr) {
		return false // cannot happen: these are octets this QP framed
	}
	b := append(q.appendBuf[:0], ulpdu...)
	for _, p := range parts {
		b = append(b, p...)
	}
	if edit != nil {
		edit(b[DDPUntaggedHeaderLen:])
	}
	q.appendBuf = b
	q.tx.rewind(l.pos, ulen)
	q.txbuf = q.tx.AppendFPDU(q.txbuf[:l.start], b)
	q.txEnds[len(q.txEnds)-1] = len(q.txbuf)
	return true
}

// TxPending returns the number of bytes queued but not yet written.
func (q *QP) TxPending() int { return len(q.txbuf) - q.txoff }

// Flush writes queued bytes. It returns nil when all are written, unix.EAGAIN
// when the socket is full, or the socket's error.
//
// FPDUs go out in records (sendmmsg with MSG_EOR), so the kernel never
// merges the end of one FPDU and the start of the next into one segment:
// FPDUs are no larger than the MSS, and so every TCP segment starts with an
// FPDU, as RFC 5044 §5.1 asks of senders ("FPDU alignment"). A record is one
// FPDU, or a run of FPDUs that each fill a segment exactly (segmentFit) and
// the FPDU after them: the kernel cuts it at the same places, but handles it
// as one large buffer (GSO) instead of one packet per FPDU, which over a
// real MTU made every FPDU cost a trip through both stacks.
func (q *QP) Flush() error {
	if q.choosing() {
		if err := q.holdForChoice(); err != nil {
			return err
		}
	}
	if q.streaming() {
		return q.flushToStream()
	}
	if len(q.holes) > 0 {
		return q.flushGather()
	}
	if q.noAlign {
		return q.flushStream()
	}
	if q.txoff == len(q.txbuf) {
		q.txDone()
		return nil
	}
	b := getBatch()
	defer b.put()
	for q.txoff < len(q.txbuf) {
		n := 0
		start, rec := q.txoff, q.recOff
		for i, end := range q.txEnds {
			if n == maxBatch {
				break
			}
			if end <= start {
				continue
			}
			if q.runOn(rec, end) && i+1 < len(q.txEnds) {
				continue // whole segments so far: the record goes on
			}
			b.iov[n].Base = &q.txbuf[start]
			b.iov[n].SetLen(end - start)
			b.mmsg[n].Hdr = unix.Msghdr{Iov: &b.iov[n], Iovlen: 1}
			b.mmsg[n].Len = 0
			n++
			start, rec = end, end
		}
		b.used = max(b.used, n)
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(q.fd), uintptr(unsafe.Pointer(&b.mmsg[0])), uintptr(n),
			q.sendFlags(), 0, 0)
		runtime.KeepAlive(q.txbuf)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		short := false
		for i := 0; i < int(r); i++ {
			q.txoff += int(b.mmsg[i].Len)
			if uint64(b.mmsg[i].Len) != b.iov[i].Len {
				short = true // the rest of this record follows in the next call
				break
			}
			q.recOff = q.txoff
			q.records++
		}
		if short || int(r) < n {
			q.dropSentEnds()
			q.retireResponses()
			return unix.EAGAIN
		}
	}
	q.txDone()
	return nil
}

// txBatch holds the messages and iovecs of a Flush's sendmmsg calls (4.6
// KiB). Taken from a pool for each Flush rather than held by every QP: a
// web server's short connections each allocated and collected them.
type txBatch struct {
	mmsg [maxBatch]unix.Mmsghdr
	iov  [maxBatch]unix.Iovec
	used int // entries written since get, cleared at put
}

var txBatches = sync.Pool{New: func() any { return new(txBatch) }}

func getBatch() *txBatch { return txBatches.Get().(*txBatch) }

// put returns b to the pool without pointers into a transmit buffer, which
// the pool would otherwise keep alive.
func (b *txBatch) put() {
	clear(b.mmsg[:b.used])
	clear(b.iov[:b.used])
	b.used = 0
	txBatches.Put(b)
}

// runOn reports whether a record that began at txbuf offset rec may go on
// after a frame that ends at end: while its FPDUs fill whole segments, up
// to maxRecord octets. Bounded, a record that a full socket cuts inside an
// FPDU (the kernel then sends the piece as a short segment) leaves few
// segments starting inside FPDUs.
func (q *QP) runOn(rec, end int) bool {
	return q.runs && (end-rec)%q.emss == 0 && end-rec < maxRecord
}

// maxRecord is about what the kernel puts into one buffer (64 KiB, GSO).
const maxRecord = 64 << 10

// txDone empties the transmit buffer once every queued byte is written.
func (q *QP) txDone() {
	if cap(q.txbuf) > txShrinkAbove {
		b := q.txbuf[:0]
		txPool.Put(&b)
		q.txbuf = nil
	} else {
		q.txbuf = q.txbuf[:0]
	}
	q.txoff, q.recOff = 0, 0
	q.txEnds = q.txEnds[:0]
	q.respEnds = q.respEnds[:0]
	clear(q.holes)
	q.holes = q.holes[:0]
	q.last.ok = false
}

// dropSentEnds forgets frame ends that are fully written.
func (q *QP) dropSentEnds() {
	i := 0
	for i < len(q.txEnds) && q.txEnds[i] <= q.txoff {
		i++
	}
	if i > 0 {
		q.txEnds = q.txEnds[:copy(q.txEnds, q.txEnds[i:])]
	}
}

// RxChunk is a receive buffer shared by the segments parsed from it. The QP
// holds one reference while the chunk is its current one, each segment
// returned from it another; the last release gives it back to its pool.
type RxChunk struct {
	buf  []byte
	refs int
}

// Receive chunks come in two sizes, shared by every QP of the process: a
// QP reads into a small one, moves to a large one when a read fills the
// room it had (a bulk stream) or an FPDU does not fit, and gives its chunk
// back when the socket has nothing more and no partial FPDU is held. So an
// idle connection holds no receive buffer at all, and one moving bulk data
// still reads up to rxChunkSize per system call.
var rxPools = [2]sync.Pool{
	{New: func() any { return &RxChunk{buf: make([]byte, rxSmallChunk)} }},
	{New: func() any { return newChunk(rxChunkSize) }},
}

// newChunk makes a large receive chunk, populated (prefault): the kernel's
// copies into a fresh one were a quarter of a fresh preloaded process's
// page faults.
func newChunk(size int) *RxChunk {
	c := &RxChunk{buf: make([]byte, size)}
	prefault(c.buf)
	return c
}

// getChunk returns a chunk of at least size bytes with one reference.
func getChunk(size int) *RxChunk {
	var c *RxChunk
	switch {
	case size <= rxSmallChunk:
		c = rxPools[0].Get().(*RxChunk)
	case size <= rxChunkSize:
		c = rxPools[1].Get().(*RxChunk)
	default:
		c = newChunk(size) // cannot happen: an FPDU fits a large chunk
	}
	c.refs = 1
	return c
}

// Release drops one reference, for a caller that took a segment's
// reference over (Segment.Chunk) so that the segment's type need not
// travel with its payload.
func (c *RxChunk) Release() { c.release() }

func (c *RxChunk) release() {
	c.refs--
	if c.refs != 0 {
		return // still referenced (or released once too often: never pooled twice)
	}
	switch len(c.buf) {
	case rxSmallChunk:
		rxPools[0].Put(c)
	case rxChunkSize:
		rxPools[1].Put(c)
	}
}

// recvDontWait is recv(2) with MSG_DONTWAIT into b (not empty). unix.Recvfrom
// allocates the sender's address for every call (about 90 allocations per
// MiB received in 16 KiB reads), which a connected stream socket never has.
func recvDontWait(fd int, b []byte) (int, error) {
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// sendDontWait is send(2) with MSG_DONTWAIT and MSG_NOSIGNAL (EPIPE, not
// SIGPIPE): sendto with no address, which the kernel takes with less work
// than sendmsg's header and iovec (and unix.SendmsgN builds both).
func sendDontWait(fd int, b []byte) (int, error) {
	r, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
		unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// Buffered returns the number of received bytes not yet parsed.
func (q *QP) Buffered() int { return q.rxw - q.rxr }

// RxHeld returns the size of the receive chunk the QP itself holds (0 when
// it holds none); segments not yet released may keep others alive.
func (q *QP) RxHeld() int {
	if q.cur == nil {
		return 0
	}
	return len(q.cur.buf)
}

// Fill reads what the socket holds without blocking. It returns the number of
// bytes read, unix.EAGAIN when there was nothing, ErrClosed at end of stream,
// or the socket's error.
func (q *QP) Fill() (int, error) {
	if q.eof {
		return 0, ErrClosed
	}
	q.drained = false
	if q.choosing() {
		if err := q.choose(); err != nil {
			if err == unix.EAGAIN {
				q.drained = true
			}
			return 0, err
		}
	}
	if q.streaming() {
		return q.fillStream(false)
	}
	if q.direct.active || q.startDirect() {
		return q.fillDirect()
	}
	q.ensureRoom(q.minRead())
	for {
		room := q.cur.buf[q.rxw:]
		if lim := q.watchRead(); lim > 0 && lim < len(room) {
			room = room[:lim]
		}
		n, err := recvDontWait(q.fd, room)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			q.drained = true
			q.empty++
			q.idle()
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			q.eof = true
			q.idle()
			return 0, ErrClosed
		}
		q.took(n, len(room))
		q.drained = n < len(room)
		return n, nil
	}
}

// took records a read of n bytes into room bytes of the chunk: a read
// that filled its room (the socket or stream may hold more) moves to
// large chunks, a small one back to small ones.
func (q *QP) took(n, room int) {
	q.rxw += n
	switch {
	case n == room:
		q.bulk = true
	case n < rxSmallChunk/4:
		q.bulk = false
	}
}

// watchRead bounds a read while tagged data is expected: RDMA Writes into
// a watched region (WatchWrites) or Read Responses to a Read Request of
// ours (not an RTR's zero-length one): a read that stops at the end of the headers of
// the next FPDU, or at the end of the FPDU whose headers are in, leaves
// the payload of a large tagged FPDU in the socket, so that direct
// placement reads it straight into the region instead of a copy out of
// the receive chunk. It costs a system call per FPDU, only then. 0: no
// bound.
func (q *QP) watchRead() int {
	if (q.watch == 0 && !q.readPending()) || q.direct.off || !q.full || q.rx == nil || q.emss < watchMinSegment {
		return 0
	}
	var buf []byte
	if q.cur != nil {
		buf = q.cur.buf[q.rxr:q.rxw]
	}
	d := q.rx
	need := ulpduLenLen + DDPTaggedHeaderLen
	if d.markers {
		if off := int(d.pos % uint64(d.spacing)); off == 0 || d.spacing-off < need {
			need += MarkerLen
		}
	}
	if len(buf) < need {
		return need - len(buf)
	}
	if _, _, _, wire, err := d.header(buf); err == nil && wire > len(buf) {
		return wire - len(buf)
	}
	return 0
}

// watchMinSegment: below this segment size (a real MTU, as on veth or
// Ethernet: about 1400 octets per FPDU) the system calls of reading FPDU
// by FPDU cost more than the copy they save, so reads are not bounded. The
// peer's FPDUs follow its MSS, which matches ours on the same path.
const watchMinSegment = 16 << 10

// Drained says that the last Fill found the socket empty (EAGAIN) or took
// less than it had room for, so the socket held nothing more then: a caller
// that would only learn EAGAIN from another read may wait for the socket
// instead (one system call less per message).
func (q *QP) Drained() bool { return q.drained }

// FillQuiet is Fill for a caller that knows the kernel has reported
// nothing on the socket since the last Fill found it empty (Drained): the
// read that would only say so again is not made (unix.EAGAIN, as Rest).
// Over a stream the ring is read, which costs no system call, and its
// doorbell socket is left alone (shm.Stream.ReadQuiet). What did come
// meanwhile keeps the socket readable, for the caller's wait.
func (q *QP) FillQuiet() (int, error) {
	switch {
	case q.eof || q.choosing():
		return q.Fill()
	case q.streaming():
		return q.fillStream(true)
	case q.drained:
		q.idle()
		return 0, unix.EAGAIN
	}
	return q.Fill()
}

// EmptyReads counts the reads that found the socket empty (EAGAIN): each is
// a system call that moved nothing.
func (q *QP) EmptyReads() uint64 { return q.empty }

// Rest is what Fill does on EAGAIN, for a caller that skipped that read
// after Drained: it gives back the receive chunk if nothing is held.
func (q *QP) Rest() { q.idle() }

// minRead is the room Fill wants before reading.
func (q *QP) minRead() int {
	if q.bulk {
		return rxMinRead
	}
	return rxSmallMinRead
}

// idle gives back the receive chunk when the socket has nothing more: all
// of it when no partial FPDU is held, and a large one for a small one when
// what is held is short.
func (q *QP) idle() {
	c := q.cur
	if c == nil {
		return
	}
	pending := q.rxw - q.rxr
	switch {
	case pending == 0:
		q.cur, q.rxr, q.rxw = nil, 0, 0
		c.release()
	case len(c.buf) > rxSmallChunk && pending <= rxSmallChunk/2:
		n := getChunk(rxSmallChunk)
		copy(n.buf, c.buf[q.rxr:q.rxw])
		q.cur, q.rxr, q.rxw = n, 0, pending
		c.release()
	}
}

// ensureRoom makes room for at least want more bytes after the unparsed ones:
// in place when nothing else points into the current chunk and it is large
// enough, else in a fresh chunk the unparsed bytes move to.
func (q *QP) ensureRoom(want int) {
	if q.cur != nil && len(q.cur.buf)-q.rxw >= want {
		return
	}
	pending := q.rxw - q.rxr
	size := rxSmallChunk
	if q.bulk || pending+want > rxSmallChunk {
		size = max(rxChunkSize, pending+want)
	}
	if c := q.cur; c != nil && c.refs == 1 && len(c.buf) >= size {
		copy(c.buf, c.buf[q.rxr:q.rxw])
		q.rxr, q.rxw = 0, pending
		return
	}
	c := getChunk(size)
	if q.cur != nil {
		copy(c.buf, q.cur.buf[q.rxr:q.rxw])
		q.cur.release()
	}
	q.cur, q.rxr, q.rxw = c, 0, pending
}

// Segment is one received DDP segment. Payload aliases a receive chunk that
// stays valid until Release.
type Segment struct {
	DDPSegment
	chunk *RxChunk
	sunk  bool // Payload lies in the receive sink (sink.go)
}

// Release gives the segment's bytes back to the QP. Call it exactly once.
func (s *Segment) Release() {
	if s.chunk != nil {
		s.chunk.release()
		s.chunk = nil
	}
}

// Chunk returns the receive chunk the segment's payload aliases, whose
// reference the segment holds: a caller that keeps only the chunk calls its
// Release instead of the segment's, exactly once.
func (s *Segment) Chunk() *RxChunk { return s.chunk }

// NextSegment returns the next complete segment from the received bytes,
// ErrNeedMore when a whole FPDU has not arrived yet, or the protocol fault.
//
// Segments that the QP handles itself are not returned: tagged segments (RDMA
// Write, Read Response) are placed into their registered regions, and Read
// Requests are answered with Read Responses queued for Flush. A Send with
// Invalidate invalidates its STag before its last segment is returned.
// After a fault every later call returns the same fault, which PostTerminate
// reports to the peer with the offending headers.
func (q *QP) NextSegment() (Segment, error) {
	var s Segment
	if err := q.NextSegmentTo(&s); err != nil {
		return Segment{}, err
	}
	return s, nil
}

// NextSegmentTo is NextSegment into *out, which it overwrites (and leaves
// unspecified on an error): the receive path takes a segment per FPDU, 46
// for 64 KiB over a 1500-octet MTU, and a segment returned by value was
// copied at each layer it crossed (docs/PERFORMANCE.md, "A segment per
// FPDU").
func (q *QP) NextSegmentTo(out *Segment) error {
	if q.fault != nil {
		return q.fault
	}
	if q.nextSunkTo(out) {
		return nil
	}
	for {
		if q.cur == nil || q.rxr == q.rxw {
			return ErrNeedMore
		}
		if q.sink.place != nil && q.chunkSinkable() {
			if ok, err := q.sinkChunk(); ok {
				if err == nil {
					q.nextSunkTo(out)
				}
				return err
			}
		}
		ulpdu, n, err := q.rx.Next(q.cur.buf[q.rxr:q.rxw])
		if err != nil {
			if err == ErrNeedMore {
				// An FPDU larger than the room left: make room for all of
				// it (its length is known once its header is in) before
				// the next read.
				want := q.minRead()
				if _, _, _, wire, err := q.rx.header(q.cur.buf[q.rxr:q.rxw]); err == nil {
					want = max(want, wire-(q.rxw-q.rxr))
				}
				q.ensureRoom(want)
				return err
			}
			return q.setFault(err, nil)
		}
		q.rxr += n
		seg := &out.DDPSegment
		if err := parseDDPSegment(seg, ulpdu); err != nil {
			return q.setFault(err, ulpdu)
		}
		q.rtrSeg = false
		if q.expectRTR != 0 {
			if err := q.checkRTR(seg); err != nil {
				return q.setFault(err, ulpdu)
			}
		}
		if seg.Tagged {
			if err := q.placeTagged(seg); err != nil {
				return q.setFault(err, ulpdu)
			}
			continue
		}
		if err := q.checkUntagged(seg); err != nil {
			return q.setFault(err, ulpdu)
		}
		q.sink.large = len(seg.Payload) >= sinkMin // (sink.go)
		if q.rtrSeg && seg.Opcode() == OpSend {
			continue // the zero-length Send RTR: sequenced, not delivered
		}
		switch seg.Opcode() {
		case OpReadRequest:
			if err := q.answerRead(seg); err != nil {
				return q.setFault(err, ulpdu)
			}
			continue
		case OpSendInvalidate, OpSendSEInvalidate:
			if seg.Last {
				if err := q.remoteInvalidate(seg); err != nil {
					return q.setFault(err, ulpdu)
				}
			}
		}
		q.cur.refs++
		out.chunk, out.sunk = q.cur, false
		return nil
	}
}

// checkUntagged enforces the ordering of untagged queues (RFC 5041 §4.3,
// §5.2, §5.3): MSN advances by one per message, MO by the bytes of each
// segment.
func (q *QP) checkUntagged(s *DDPSegment) error { return q.checkUntaggedLen(s, len(s.Payload)) }

// checkUntaggedLen is checkUntagged for a segment of n payload octets.
func (q *QP) checkUntaggedLen(s *DDPSegment, n int) error {
	if s.QN >= numQueues {
		return &Error{Layer: LayerDDP, Type: DDPErrTypeUntagged, Code: DDPErrInvalidQN, Msg: "DDP: invalid QN " + utoa(s.QN)}
	}
	qn := s.QN
	if s.MSN != q.recvMSN[qn] {
		return &Error{Layer: LayerDDP, Type: DDPErrTypeUntagged, Code: DDPErrMSNRange,
			Msg: "DDP: QN " + utoa(qn) + " MSN " + utoa(s.MSN) + ", want " + utoa(q.recvMSN[qn])}
	}
	if s.MO != q.recvMO[qn] {
		return &Error{Layer: LayerDDP, Type: DDPErrTypeUntagged, Code: DDPErrInvalidMO,
			Msg: "DDP: MO " + utoa(s.MO) + ", want " + utoa(q.recvMO[qn])}
	}
	if s.Last {
		q.recvMSN[qn]++
		q.recvMO[qn] = 0
	} else {
		q.recvMO[qn] += uint32(n)
	}
	return nil
}

func utoa(v uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// Full reports whether the QP is in Full Operation (FPDU framing).
func (q *QP) Full() bool { return q.full }

// PostTerminate queues a Terminate message (RDMAP opcode 7 on QN 2) that
// reports err to the peer. When err is the fault NextSegment returned, the
// Terminate also carries the offending segment's headers.
func (q *QP) PostTerminate(err *Error) {
	var b [termBufLen]byte
	q.postUntagged(OpTerminate, QNTerminate, 0, [][]byte{q.terminatePayload(b[:0], err)})
}

// SetAlign chooses, before StartFullOperation, whether each FPDU fits one
// TCP segment and is handed to the kernel as its own record (every segment
// starts with an FPDU, as RFC 5044 §5.1 asks of senders, and Wireshark can
// follow markers) or FPDUs are as large as ULPDU_Length allows and the
// transmit buffer goes out as one stream, which the kernel cuts into
// segments: measured about twice as fast over loopback and between two
// namespaces (docs/PROTOCOL.md §3, "Size and alignment"). Receivers frame by
// ULPDU_Length either way. A QP aligns until told otherwise.
func (q *QP) SetAlign(align bool) { q.noAlign = !align }

func (q *QP) sendFlags() uintptr {
	return unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL | unix.MSG_EOR
}

// writeSocket writes the transmit buffer up to end to the socket as one
// stream, as much as the socket takes.
func (q *QP) writeSocket(end int) error {
	for q.txoff < end {
		n, err := sendDontWait(q.fd, q.txbuf[q.txoff:end])
		if err == unix.EINTR {
			continue
		}
		if n > 0 {
			q.txoff += n
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// flushStream writes the transmit buffer without record boundaries.
func (q *QP) flushStream() error {
	if err := q.writeSocket(len(q.txbuf)); err != nil {
		q.dropSentEnds()
		q.retireResponses()
		return err
	}
	q.txDone()
	return nil
}
