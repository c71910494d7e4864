package shm

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Stream is one end of a connection's byte stream over a region: this
// side's producer and consumer, and the connection's TCP socket as the
// doorbell. A side rings (one byte on the socket) only when the other has
// said it sleeps (Consumer.Sleep) or waits for room (Producer.WaitRoom),
// so a busy pair makes no system call per message; the byte also makes
// the socket readable, which is what the application's poll, select and
// epoll on its descriptor, the TCP socket, wait for. The socket's end of
// stream or error is the peer's: the peer closes it last, after what it
// published, so a side reads the rings to their end before it reports it.
//
// Not safe for concurrent use; Read and Write may be called by one
// goroutine each.
type Stream struct {
	fd       int
	tx       *Producer
	rx       *Consumer
	sleeping bool  // rx announced Sleep and has not read since
	end      error // the socket's end (io.EOF) or error, once seen
	finished bool  // Finish: nothing more is read or written
	// TrimIdle's view: the producer's position at its last call, and
	// whether the ring was trimmed at that position.
	swept   uint64
	trimmed bool

	// Counters, all time.
	BellsRung  uint64 // doorbells written
	BellsHeard uint64 // doorbell bytes read
	Empty      uint64 // reads that found the ring empty
	Waits      uint64 // writes that found the ring full and wait for room
}

// NewStream is this side's stream over r (maker: the side that created
// it) with fd, the connection's socket, as the doorbell.
func NewStream(r *Region, maker bool, fd int) (*Stream, error) {
	tx, rx, err := r.Ends(maker)
	if err != nil {
		return nil, err
	}
	return &Stream{fd: fd, tx: tx, rx: rx}, nil
}

// ErrForeign: the socket carried octets that are not doorbells.
var ErrForeign = errors.New("shm: the peer wrote other octets than doorbells on the socket")

// Own hands r, the region under s, to s: once s is unreachable, r is
// unmapped (and its memfd closed), with no call that could come too early
// while a connection's last goroutine still reads it.
func (s *Stream) Own(r *Region) {
	runtime.AddCleanup(s, func(r *Region) { _ = r.Close() }, r)
}

// ErrFinished: the stream's connection is over on this side (Finish).
var ErrFinished = errors.New("shm: the stream is finished")

// Finish ends this side's use of the stream, whose connection is over
// here (closed and settled, reset or failed): nothing more is read from it
// or written to it, and the data pages of both rings go back to the kernel
// now, for both processes (MADV_REMOVE on the shared memfd), except those
// of the ring this side writes that hold records the peer has not read
// yet (Producer.TrimUnread; the peer's own Finish gives them back, or the
// last unmapping does). The
// mapping itself stays until the stream is unreachable (Own): a closed
// connection then holds two control pages where it held up to both rings
// until the garbage collector's next cycle, which an idle process may not
// run for minutes. Called by the goroutine that owns the stream (Read and
// Write's).
func (s *Stream) Finish() {
	if s.finished {
		return
	}
	s.finished = true
	_ = removePages(s.rx.r.data) // this side reads nothing more
	_ = s.tx.TrimUnread()
}

// TrimIdle gives back the data pages of the ring this side writes when it
// has written nothing since the last call, all but those that hold records
// the peer has not read yet (Producer.TrimUnread): called at intervals, it
// leaves a connection that went quiet with its control pages and a page or
// two, whatever it carried before (a ring that carried bulk held all its
// pages until the connection closed). It reports whether it trimmed. Called by the
// goroutine that owns the stream (Write's).
func (s *Stream) TrimIdle() bool {
	if s.finished {
		return false
	}
	if s.tx.head != s.swept {
		s.swept, s.trimmed = s.tx.head, false
		return false
	}
	if s.trimmed || s.tx.TrimUnread() != nil {
		return false
	}
	s.trimmed = true
	return true
}

// Bell is the doorbell's octet. It is not 0, which is what the first
// octet of a connection's first FPDU is (the high octet of a short
// message's ULPDU_Length, or a marker's reserved half): the side that
// takes the stream rings at once (Ring), and its peer tells from that one
// octet whether FPDUs come over the stream or the socket.
const Bell = 0xdb

// Ring rings the doorbell whatever the peer has said: the first octet of
// a side that takes the stream.
func (s *Stream) Ring() { s.ring() }

// SetFd moves the doorbell to another descriptor of the same socket.
func (s *Stream) SetFd(fd int) { s.fd = fd }

// Write publishes as much of b as the ring takes now. It returns
// unix.EAGAIN when it took nothing: the peer rings when it frees room.
func (s *Stream) Write(b []byte) (int, error) {
	if s.finished {
		return 0, ErrFinished
	}
	n := 0
	for n < len(b) {
		k, err := s.tx.Write(b[n:])
		n += k
		if err == ErrFull {
			if n > 0 {
				break
			}
			// Woken when half the ring is free (or what b needs, if
			// less): the peer rings once per half ring read, not once
			// per record.
			wait, err := s.tx.WaitRoom(min(len(b), len(s.tx.r.data)/2))
			if err != nil {
				return 0, err
			}
			if wait {
				s.Waits++
				return 0, unix.EAGAIN
			}
			continue // room came meanwhile
		}
		if err != nil {
			return n, err
		}
	}
	if s.tx.Publish() {
		s.ring()
	}
	return n, nil
}

// Read takes what the ring holds into b. It returns unix.EAGAIN when
// there is nothing, having told the producer to ring; once the ring is
// read to its end after the peer closed or reset the socket, io.EOF or
// the socket's error; ErrCorrupt for a ring the peer broke.
func (s *Stream) Read(b []byte) (int, error) { return s.read(b, false) }

// ReadQuiet is Read for a caller that knows the kernel has reported
// nothing on the socket since this side last found the ring empty: when
// the ring holds nothing it does not drain the socket, where the peer can
// only have rung for bytes the ring would show (or, rarely, for bytes
// already read: that doorbell keeps the socket readable, and the caller's
// wait returns for a Read that drains it). It announces sleep as Read does.
func (s *Stream) ReadQuiet(b []byte) (int, error) { return s.read(b, true) }

func (s *Stream) read(b []byte, quiet bool) (int, error) {
	if s.finished {
		return 0, ErrFinished
	}
	for {
		n, err := s.rx.Read(b)
		if n > 0 {
			s.took()
			return n, nil
		}
		if err != ErrEmpty {
			return 0, err
		}
		s.Empty++
		if s.end == nil && !quiet {
			s.end = s.drain()
		}
		if s.end != nil {
			// The peer's end (its close, or a reset: a peer that exits
			// with doorbells unread resets the socket) comes after what
			// it published: the ring is read to its end first.
			if more, err := s.rx.Pending(); err != nil || more {
				if err != nil {
					return 0, err
				}
				continue
			}
			return 0, s.end
		}
		sleep, err := s.rx.Sleep()
		if err != nil {
			return 0, err
		}
		if sleep {
			s.sleeping = true
			return 0, unix.EAGAIN
		}
	}
}

// took follows a read that took bytes: this side is awake (the peer need
// not ring for what it publishes next), and the peer is rung if it waits
// for the room the read freed.
func (s *Stream) took() {
	if s.sleeping {
		s.rx.Awake()
		s.sleeping = false
	}
	if s.rx.Release() {
		s.ring()
	}
}

// drain reads the doorbell bytes the socket holds. It returns io.EOF at
// the peer's end of stream, the socket's error, or nil.
func (s *Stream) drain() error {
	var buf [256]byte
	for {
		r, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
			unix.MSG_DONTWAIT, 0, 0)
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			return nil
		case e != 0:
			return e
		case r == 0:
			return io.EOF
		}
		s.BellsHeard += uint64(r)
		for _, b := range buf[:r] {
			if b != Bell {
				// The peer wrote something else on the socket: it
				// withdrew its offer while this side took it.
				return ErrForeign
			}
		}
		if int(r) < len(buf) {
			return nil
		}
	}
}

// ring writes one doorbell byte. A full socket already holds unread
// ones, and a peer that has gone is learnt from the socket when reading.
func (s *Stream) ring() {
	one := [1]byte{Bell}
	for {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), uintptr(unsafe.Pointer(&one[0])), 1,
			unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
		if e != unix.EINTR {
			if e == 0 {
				s.BellsRung++
			}
			return
		}
	}
}

// Watch is for a reader that polls before it sleeps: it withdraws this
// side's sleep announcement, so that the peer does not ring while the
// reader polls, and returns the peer's shared position and what this side
// has seen of it: the peer has published more once an atomic load of head
// differs from seen. That load may run while another goroutine owns the
// stream; the reader reads (Read) before it sleeps, which announces sleep
// again.
func (s *Stream) Watch() (head *uint64, seen uint64) {
	s.Withdraw()
	return s.rx.r.head, s.rx.head
}

// Withdraw takes back this side's sleep announcement without polling: the
// reader woke for something else and looks at this stream before it
// sleeps again (a look reads the ring, then announces sleep anew), so the
// peer need not ring for what it publishes meanwhile. It reports whether
// an announcement was taken back; a doorbell already rung for it still
// comes.
func (s *Stream) Withdraw() bool {
	if !s.sleeping {
		return false
	}
	s.rx.Awake()
	s.sleeping = false
	return true
}

// AppendRecord appends the concatenation of parts as one record if the
// ring has room for all of it now, unpublished until Push; false, and
// nothing written, if not.
func (s *Stream) AppendRecord(parts ...[]byte) (bool, error) {
	if s.finished {
		return false, ErrFinished
	}
	err := s.tx.Append(parts...)
	if err == ErrFull || err == ErrTooBig {
		return false, nil
	}
	return err == nil, err
}

// Push publishes the records AppendRecord wrote and rings if the peer
// sleeps.
func (s *Stream) Push() {
	if s.tx.Publish() {
		s.ring()
	}
}

// Prompt asks the peer to read this side's records as they come from now
// on, not to leave some behind others (urgent data follows).
func (s *Stream) Prompt() { s.tx.Prompt() }

// Prompted reports whether the peer asked for its records to be read as
// they come (Prompt).
func (s *Stream) Prompted() bool { return s.rx.Prompted() }

// Holds reports whether Read would take at least n bytes now; false on a
// ring the peer broke, which Read then reports.
func (s *Stream) Holds(n int) bool {
	if s.finished {
		return false
	}
	ok, err := s.rx.Holds(n)
	return ok && err == nil
}

// Pending reports whether bytes wait in the ring to be read.
func (s *Stream) Pending() (bool, error) {
	if s.finished {
		return false, ErrFinished
	}
	return s.rx.Pending()
}

// String describes the stream's positions and announcements, for logs
// and failing tests.
func (s *Stream) String() string {
	return fmt.Sprintf("tx head=%d pub=%d tail=%d want=%d; rx tail=%d head=%d left=%d sleep=%d sleeping=%v; bells %d/%d waits %d end=%v",
		s.tx.head, s.tx.pub, atomic.LoadUint64(s.tx.r.tail), atomic.LoadUint64(s.tx.r.want),
		s.rx.tail, atomic.LoadUint64(s.rx.r.head), s.rx.left, atomic.LoadUint64(s.rx.r.sleep), s.sleeping,
		s.BellsRung, s.BellsHeard, s.Waits, s.end)
}
