package iwarp

import (
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// ByteStream carries a QP's FPDUs instead of its socket: shared memory
// between two processes on one host (package shm). The MPA exchange still
// crosses the socket; from Full Operation on, both directions use the
// stream, whose Read and Write never block.
type ByteStream interface {
	// Read takes what has arrived into b: unix.EAGAIN when nothing has,
	// io.EOF at the peer's end of stream, or the stream's error.
	Read(b []byte) (int, error)
	// Write takes what it can of b: unix.EAGAIN when it took nothing.
	Write(b []byte) (int, error)
	// SetFd follows the QP to another descriptor of its socket.
	SetFd(fd int)
}

// UseStream makes the QP carry its FPDUs over s from StartFullOperation
// on. What was queued before (the MPA Reply) still goes to the socket,
// and what the socket holds after the peer's MPA frame is not the QP's.
func (q *QP) UseStream(s ByteStream) {
	q.stream = s
	q.holder, _ = s.(HoldStream)
	q.recorder, _ = s.(RecordStream)
}

// StreamChoice is a stream offered to the peer, which takes it or not
// after Full Operation has begun: the connecting side offers (its MPA
// Reply names the stream), the accepting side chooses, and the first
// octets it sends over the socket afterwards say which.
type StreamChoice interface {
	// Choose reports the peer's choice without blocking, from what the
	// socket fd holds: the stream, nil for the socket itself, unix.EAGAIN
	// while nothing says yet; any other error fails the QP.
	Choose(fd int) (ByteStream, error)
	// Withdraw keeps the peer from taking the stream from now on, and
	// reports whether it could: false when the peer had begun to take it,
	// so that its answer is on its way.
	Withdraw() bool
}

// OfferStream makes the QP's FPDUs wait, from StartFullOperation on, for
// the peer's choice (what was queued before still goes to the socket):
// Fill and Flush ask c, and the QP carries its FPDUs over the stream c
// returns, or over the socket as without it. Nothing is sent or read in
// between, so both ends agree on where every FPDU went.
func (q *QP) OfferStream(c StreamChoice) { q.choice = c }

// Offer returns the offer OfferStream made while the peer has not chosen
// yet, or nil.
func (q *QP) Offer() StreamChoice {
	if q.stream != nil {
		return nil
	}
	return q.choice
}

// choosing reports whether FPDUs wait for the peer's choice.
func (q *QP) choosing() bool { return q.choice != nil && q.full }

// Choosing reports whether the peer's choice is still awaited: the
// socket's next octets bring it, so a sender waits for it to be readable.
func (q *QP) Choosing() bool { return q.choosing() }

// Decline withdraws an offer the peer has not answered yet: the held
// FPDUs go over the socket after all. For a side that must send now (an
// abortive close, an exiting process). The offer's Withdraw decides with
// the peer: one that had begun to take the stream rings for it at once,
// and Decline waits for that answer (up to declineWait) and follows it;
// one that had not can no longer take it and sees the held FPDUs after its
// MPA frame. Only a peer silent for declineWait after it began finds them
// where it expects doorbells, which fails that connection (shm.Stream's
// drain).
func (q *QP) Decline() {
	if !q.choosing() {
		return
	}
	// An answer already here is taken: the peer has moved.
	if err := q.choose(); err != unix.EAGAIN {
		return
	}
	if !q.choice.Withdraw() {
		deadline := time.Now().Add(declineWait)
		for {
			if err := q.choose(); err != unix.EAGAIN {
				return
			}
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			fds := []unix.PollFd{{Fd: int32(q.fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, int(left/time.Millisecond)+1); err != nil && err != unix.EINTR {
				break
			}
		}
	}
	q.choice = nil
	q.rawEnd = 0
}

// declineWait bounds Decline's wait for the answer of a peer that has begun
// to take the stream: its doorbell follows the region it hands over.
const declineWait = 2 * time.Second

// Quiet reports whether nothing follows the peer's MPA frame yet: no
// octet read past it and none waiting in the socket. A side that takes a
// stream offer checks it first: octets there are FPDUs the peer sent over
// the socket, having declined its own offer.
func (q *QP) Quiet() bool {
	if q.rxw > q.rxr {
		return false
	}
	_, err := PeekOctet(q.fd)
	return err == unix.EAGAIN
}

// PeekOctet returns the socket's next octet without taking it: io.EOF at
// its end, unix.EAGAIN when nothing is there yet.
func PeekOctet(fd int) (byte, error) {
	var b [1]byte
	for {
		n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return b[0], nil
	}
}

// choose asks the choice once: unix.EAGAIN while the peer has not chosen.
func (q *QP) choose() error {
	s, err := q.choice.Choose(q.fd)
	if err != nil {
		return err
	}
	q.choice = nil
	if s == nil {
		q.rawEnd = 0 // over the socket: the held FPDUs follow the Reply
		return nil
	}
	q.UseStream(s)
	rawEnd := q.rawEnd
	q.startStream()
	q.rawEnd = rawEnd // the Reply's end, not the held FPDUs'
	return nil
}

// holdForChoice is Flush while the peer chooses: the octets queued before
// Full Operation go to the socket, the FPDUs wait (unix.EAGAIN).
func (q *QP) holdForChoice() error {
	err := q.choose()
	if err == nil {
		return nil // chosen: Flush goes on the chosen way
	}
	if err != unix.EAGAIN {
		return err
	}
	if err := q.writeSocket(q.rawEnd); err != nil {
		q.dropSentEnds()
		return err
	}
	q.dropSentEnds()
	if q.txoff == len(q.txbuf) {
		q.txDone()
		q.rawEnd = 0
		return nil
	}
	return unix.EAGAIN
}

// Watcher is a stream whose reader may poll for the peer's next bytes
// instead of sleeping until it rings (shm.Stream.Watch).
type Watcher interface {
	Watch() (head *uint64, seen uint64)
	Withdraw() bool
}

// Watch returns what a caller that polls before it waits checks for bytes
// the QP has not read (the stream's Watch: the peer has published more once
// an atomic load of head differs from seen), or a nil head when FPDUs do
// not travel over a stream that can be watched. The QP reads the stream
// again before it reports itself drained.
func (q *QP) Watch() (head *uint64, seen uint64) {
	w, ok := q.stream.(Watcher)
	if !ok || !q.streaming() {
		return nil, 0
	}
	q.drained = false
	return w.Watch()
}

// Withdraw takes back the stream's sleep announcement (shm.Stream.Withdraw)
// for a reader that will look again before it sleeps; false when there was
// none or FPDUs do not travel over such a stream. The QP reads the stream
// again before it reports itself drained.
func (q *QP) Withdraw() bool {
	w, ok := q.stream.(Watcher)
	if !ok || !q.streaming() || !w.Withdraw() {
		return false
	}
	q.drained = false
	return true
}

// Stream returns the stream UseStream gave, or nil.
func (q *QP) Stream() ByteStream { return q.stream }

// streaming reports whether FPDUs travel over the stream now.
func (q *QP) streaming() bool { return q.stream != nil && q.full }

// startStream is StartFullOperation's part for a stream: the octets
// queued so far go to the socket, and the socket's unread octets (the
// peer's doorbells, if any) are the stream's business.
func (q *QP) startStream() {
	q.rawEnd = len(q.txbuf)
	q.rxr = q.rxw
	q.idle()
	// The socket may be drained, not the stream: a caller must read the
	// stream (which tells the peer to ring) before it waits.
	q.drained = false
	q.runs = false
}

// QuietReader is a stream that can be read without looking at its socket
// (shm.Stream.ReadQuiet).
type QuietReader interface{ ReadQuiet(b []byte) (int, error) }

// readStream reads the stream into b; quiet: without looking at its
// socket, where the stream can (QuietReader).
func (q *QP) readStream(b []byte, quiet bool) (int, error) {
	if quiet {
		if qr, ok := q.stream.(QuietReader); ok {
			return qr.ReadQuiet(b)
		}
	}
	return q.stream.Read(b)
}

// fillStream is Fill over the stream; quiet: FillQuiet's.
func (q *QP) fillStream(quiet bool) (int, error) {
	q.ensureRoom(q.minRead())
	room := q.cur.buf[q.rxw:]
	if q.holder != nil {
		n, lim, err, done := q.sinkFill(quiet)
		if done {
			return q.streamRead(n, err)
		}
		if lim > 0 && lim < len(room) {
			room = room[:lim]
		}
	}
	n, err := q.readStream(room, quiet)
	if n > 0 {
		q.took(n, len(room))
	}
	return q.streamRead(n, err)
}

// streamRead is a stream read's outcome for Fill: n octets read, else why
// not.
func (q *QP) streamRead(n int, err error) (int, error) {
	switch {
	case n > 0:
		// Only a read that found the stream empty told the peer to ring:
		// a caller must not wait on the socket before one.
		q.drained = false
		return n, nil
	case err == unix.EAGAIN:
		q.drained = true
		q.empty++
		q.idle()
		return 0, err
	case err == io.EOF:
		q.eof = true
		q.idle()
		return 0, ErrClosed
	case err == nil:
		return 0, unix.EAGAIN
	}
	return 0, err
}

// flushToStream is Flush over the stream: the octets queued before Full
// Operation to the socket, the rest (holes filled: the stream copies
// anyway) to the stream.
func (q *QP) flushToStream() error {
	if err := q.writeSocket(q.rawEnd); err != nil {
		q.dropSentEnds()
		return err
	}
	for _, h := range q.holes {
		if h.end() > q.txoff {
			copy(q.txbuf[h.start:h.end()], h.src)
			q.holeCopied += uint64(len(h.src))
		}
	}
	clear(q.holes)
	q.holes = q.holes[:0]
	for q.txoff < len(q.txbuf) {
		n, err := q.stream.Write(q.txbuf[q.txoff:])
		q.txoff += n
		if err != nil {
			q.dropSentEnds()
			q.retireResponses()
			return err
		}
	}
	q.txDone()
	q.rawEnd = 0
	return nil
}
