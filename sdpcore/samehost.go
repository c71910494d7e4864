package sdpcore

// Same host: a connection between two processes on one host may carry its
// messages over a stream in shared memory (package shm) instead of its TCP
// socket (NewActiveStream, NewPassiveStream). The setup exchange still
// crosses the socket; from its end on, both directions use the stream, and
// the socket carries only the stream's doorbells and the connection's
// ends (a peer's close or reset, learnt after the stream is read to its
// end). The iWARP framing is the same over both, so every flow control,
// buffering and progress mode, zero copy and urgent data work unchanged.
//
// Waiting for room to send is waiting for the socket to become readable:
// the peer rings when it frees ring space (roomEvent).
//
// Known: over rings of 64 KiB (about one FPDU of loopback's segment size)
// a bulk sender and its receiver sometimes both wait 60-100 ms (one run in
// three or four of BenchmarkSharedMemory's 64 KiB and 1 MiB sends with its
// rings made that small; not seen in 15 runs with rings of 1 MiB). A
// snapshot of one such wait: the sender had counted the doorbell it wrote,
// the receiver's socket still held nothing, and 20 ms later it held the
// byte. The kernel's delivery of a one-byte segment over loopback was late
// (most likely its deferred network processing waiting for a CPU; not
// proved), and every full ring is one more doorbell to wait for. The data arrives whole either way. A
// doorbell that is not a TCP segment (an eventfd passed at the rendezvous,
// beside the socket in the shim's poll) would not wait for it.

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"libsdp/iwarp"
	"libsdp/shm"
)

// CapSameHost is the Hello/HelloAck capability bit (the Cap nibble of
// Hello Header and HelloAck Header byte 1) of shared memory: in a Hello,
// the accepting side may take it; in a HelloAck, the connecting side
// offers it, and the HelloAck names the rendezvous (SameHost).
const CapSameHost = 0x08

// SameHostRing is the data size of each ring of a connection's region:
// large enough that a bulk sender rarely waits for a doorbell (rings of
// 64 KiB did, see above); pages cost memory only once written.
const SameHostRing = 1 << 20

// sameHoster is a Transport that can carry its messages over shared
// memory (qpTransport).
type sameHoster interface {
	// OfferSameHost is the connecting side's offer, made before its setup
	// reply: a rendezvous whose name the HelloAck carries. Its messages
	// wait, from StartMessages on, for the accepting side's choice.
	OfferSameHost() (name [16]byte, err error)
	// JoinSameHost is the accepting side's choice, made before
	// StartMessages: it takes the region the offer names, or returns why
	// not and stays on the socket.
	JoinSameHost(name [16]byte, ring int) error
	// DeclineSameHost withdraws the connecting side's offer, for a side
	// that must send at once (an abortive close): its held messages go
	// over the socket.
	DeclineSameHost()
	// SameHost reports whether messages go over shared memory now.
	SameHost() bool
	// Bells counts the doorbells written and read over shared memory.
	Bells() (rung, heard uint64)
	// Watch returns what a caller that polls before it waits (Spin)
	// checks for the peer's next bytes (Arrival), or a nil head when not
	// over shared memory.
	Watch() (head *uint64, seen uint64)
	// Withdraw takes back this side's sleep announcement (the peer need
	// not ring) for a reader that looks again before it sleeps.
	Withdraw() bool
	// Retire ends the use of the shared memory of a connection that is
	// over on this side, and gives its pages back (shm.Stream.Finish).
	Retire()
	// TrimIdle gives back the pages of the ring this side writes once it
	// has been idle since the last call (shm.Stream.TrimIdle).
	TrimIdle() bool
}

var _ sameHoster = (*qpTransport)(nil)

// offerSameHost adds the offer to the HelloAck of a Hello that asked for
// it, when this side allows it (Config.SameHost) and can listen.
func (c *Conn) offerSameHost(ha *HelloAck) {
	sh, ok := c.tr.(sameHoster)
	switch {
	case !c.cfg.SameHost:
		c.stats.SameHostNote = "off here (SDP_SHM=0)"
	case c.cfg.SameHostOff != "":
		c.stats.SameHostNote = c.cfg.SameHostOff
	case !ok:
		c.stats.SameHostNote = "transport without shared memory"
	case c.fc.ring():
		// The rdma and nic modes are RDMA Writes into a receive ring,
		// which the peer's SO_RCVBUF does not bound once the stream
		// under them is a ring of its own: kept on iWARP.
		c.stats.SameHostNote = "not with " + c.fc.String() + " flow control"
	default:
		name, err := sh.OfferSameHost()
		if err != nil {
			c.stats.SameHostNote = err.Error()
			return
		}
		ha.Cap |= CapSameHost
		ha.SameHost = name
	}
}

// sameHostRing is the data size of each ring of a region this side makes:
// SameHostRing, or less where the application set smaller socket buffers
// (bufsize.go), which TCP would hold to.
func (c *Conn) sameHostRing() int {
	ring := SameHostRing
	for _, l := range []int{c.sndLimit, c.rcvLimit} {
		for l > 0 && ring > shm.MinData && ring > l {
			ring /= 2
		}
	}
	return ring
}

// WithdrawSameHost withdraws an offer of shared memory the peer has not
// answered yet and hands what it held to the kernel, for a process that
// exits: the kernel delivers a socket's bytes after the process is gone,
// as TCP would have, where held ones would be lost.
func (c *Conn) WithdrawSameHost() {
	c.mu.Lock()
	defer c.unlock()
	c.declineSameHost()
	_ = c.flush()
}

// Retire is called once the connection is over for the application and
// the engine (closed and settled, lingered, reset or failed): a connection
// over shared memory gives back the pages of its rings at once, where its
// region would otherwise stay whole until the garbage collector found the
// connection unreachable, which in a process that allocates little (an
// idle server, a proxy between requests) can take minutes and held 30-75
// MB of closed connections' rings in python3 http.server and haproxy
// after a few hundred 2 MiB responses. Nothing is read or written on the
// connection's stream afterwards.
func (c *Conn) Retire() {
	c.mu.Lock()
	defer c.unlock()
	if sh, ok := c.tr.(sameHoster); ok {
		sh.Retire()
	}
}

// TrimIdle is called at intervals (preload's sweep, every half second): a
// connection over shared memory that has sent nothing since the last call,
// and whose peer has read everything it sent, gives back the pages of the
// ring it writes; the peer does the same with the other ring. A quiet
// connection then holds its control pages (an idle connection may hold at
// most 64 KiB, docs/RELIABILITY.md), where one that had carried bulk kept
// both rings (2 MiB) until it closed. It reports whether it trimmed.
func (c *Conn) TrimIdle() bool {
	c.mu.Lock()
	defer c.unlock()
	if sh, ok := c.tr.(sameHoster); ok {
		return sh.TrimIdle()
	}
	return false
}

// declineSameHost withdraws an unanswered offer (abort, exit).
func (c *Conn) declineSameHost() {
	if sh, ok := c.tr.(sameHoster); ok {
		sh.DeclineSameHost()
	}
}

// joinSameHost takes the offer a HelloAck makes, if it makes one.
func (c *Conn) joinSameHost(h *HelloAck) {
	sh, ok := c.tr.(sameHoster)
	switch {
	case h.Cap&CapSameHost == 0:
		c.stats.SameHostNote = "not offered by the peer"
	case !ok:
		c.stats.SameHostNote = "transport without shared memory"
	default:
		if err := sh.JoinSameHost(h.SameHost, c.sameHostRing()); err != nil {
			c.stats.SameHostNote = err.Error()
		}
	}
}

// The exchange, on the connection's socket, after the HelloAck: the
// accepting side connects to the rendezvous (which only a process in the
// same network namespace can), hands over a region it made (a sealed
// memfd, by SCM_RIGHTS) and rings the doorbell, all before its first FPDU,
// which then goes into the ring; or it sends that FPDU over the socket.
// The connecting side holds its FPDUs until the socket's first octet says
// which: the doorbell's (shm.Bell), or an FPDU's (0). Nothing moves before
// both know, so the two ends never disagree about where an FPDU went.

func (t *qpTransport) OfferSameHost() ([16]byte, error) {
	// A peer at another address cannot take it, and the offer would
	// hold this side's first messages for the answer.
	if !t.qp().PeerLocal() {
		return [16]byte{}, errors.New("the peer is not on this host")
	}
	rv, err := shm.Listen()
	if err != nil {
		return [16]byte{}, err
	}
	rv.Move(raiseFd)
	ownFd(rv.Fd(), true)
	o := &sameHostOffer{rv: rv, spare: [2]int{-1, -1}}
	for i := range o.spare {
		fd, err := unix.FcntlInt(uintptr(rv.Fd()), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			o.close()
			return [16]byte{}, fmt.Errorf("no descriptors to spare for a region: %w", err)
		}
		o.spare[i] = raiseFd(fd)
		ownFd(o.spare[i], true)
	}
	// A connection that ends before the peer chooses closes it too.
	runtime.AddCleanup(t.qp(), func(o *sameHostOffer) { o.close() }, o)
	t.qp().OfferStream(o)
	return rv.Name, nil
}

func (t *qpTransport) DeclineSameHost() { t.qp().Decline() }

func (t *qpTransport) JoinSameHost(name [16]byte, ring int) error {
	if !t.qp().Quiet() {
		return errors.New("the peer sent over TCP after its Reply (it withdrew its offer)")
	}
	r, err := shm.Create(ring)
	if err != nil {
		return err
	}
	s, err := shm.NewStream(r, true, t.qp().Fd())
	if err != nil {
		r.Close()
		return err
	}
	p, err := shm.Dial(shm.Name(name))
	if err != nil {
		r.Close()
		return err
	}
	err = p.SendRegion(r)
	p.Close()
	r.CloseFd()
	if err != nil {
		r.Close()
		return err
	}
	s.Own(r)
	s.Ring() // the octet that tells the connecting side
	t.qp().UseStream(s)
	return nil
}

// shmStream is the QP's stream over shared memory, or nil.
func (t *qpTransport) shmStream() *shm.Stream {
	s, _ := t.qp().Stream().(*shm.Stream)
	return s
}

// Retire is sameHoster's: the QP reads and writes nothing more, and the
// stream's pages go back to the kernel.
func (t *qpTransport) Retire() {
	if s := t.shmStream(); s != nil {
		s.Finish()
	}
}

func (t *qpTransport) TrimIdle() bool {
	s := t.shmStream()
	return s != nil && s.TrimIdle()
}

func (t *qpTransport) Watch() (*uint64, uint64) { return t.qp().Watch() }
func (t *qpTransport) Withdraw() bool           { return t.qp().Withdraw() }

func (t *qpTransport) Bells() (rung, heard uint64) {
	if s := t.shmStream(); s != nil {
		return s.BellsRung, s.BellsHeard
	}
	return 0, 0
}

func (t *qpTransport) SameHost() bool {
	return t.qp().Stream() != nil && !t.qp().Choosing()
}

// sameHostOffer is the connecting side's offer, as the QP's StreamChoice.
type sameHostOffer struct {
	mu sync.Mutex // Choose, and the cleanup on another goroutine
	rv *shm.Rendezvous
	// spare holds two descriptors from the offer to the choice, given
	// back just before take needs two (the accepted socket and the
	// region's memfd): once the peer has rung for shared memory, a
	// process at its descriptor limit could not follow it, and the
	// connection would fail where it can stay on iWARP by not offering.
	spare [2]int
	// prompted: this side sent urgent data while the peer chose; the
	// stream it takes is marked before the held messages go into it.
	prompted bool
}

// prompt is PromptPeer while the peer chooses.
func (o *sameHostOffer) prompt() {
	o.mu.Lock()
	o.prompted = true
	o.mu.Unlock()
}

// Choose reads the accepting side's choice from the socket's first octet.
func (o *sameHostOffer) Choose(fd int) (iwarp.ByteStream, error) {
	b, err := iwarp.PeekOctet(fd)
	if err == unix.EAGAIN {
		return nil, err
	}
	defer o.close()
	if err != nil || b != shm.Bell {
		return nil, nil // an FPDU, the end or an error: all the socket's
	}
	s, err := o.take(fd)
	if err != nil {
		return nil, &ProtoError{Err: fmt.Errorf("sdp: the peer took shared memory, but its region: %w", err)}
	}
	return s, nil
}

// Withdraw refuses the rendezvous to the accepting side from now on; false
// when it had connected already, so that its doorbell follows.
func (o *sameHostOffer) Withdraw() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rv == nil {
		return true // closed: nobody can connect
	}
	came, _ := o.rv.Refuse()
	return !came
}

// take accepts the accepting side at the rendezvous and maps its region:
// both came before the doorbell octet that says so, so nothing waits.
func (o *sameHostOffer) take(fd int) (*shm.Stream, error) {
	o.mu.Lock()
	rv, prompted := o.rv, o.prompted
	o.releaseSpare()
	o.mu.Unlock()
	if rv == nil {
		return nil, errors.New("rendezvous closed")
	}
	p, err := rv.Accept(0)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	r, err := p.RecvRegion(0, 0)
	if err != nil {
		return nil, err
	}
	s, err := shm.NewStream(r, false, fd)
	if err != nil {
		r.Close()
		return nil, err
	}
	s.Own(r)
	if prompted {
		s.Prompt()
	}
	return s, nil
}

// releaseSpare closes the spare descriptors; o.mu is held.
func (o *sameHostOffer) releaseSpare() {
	for i, fd := range o.spare {
		if fd >= 0 {
			closeOwn(fd)
			o.spare[i] = -1
		}
	}
}

func (o *sameHostOffer) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.releaseSpare()
	if o.rv != nil {
		ownFd(o.rv.Fd(), false)
		o.rv.Close()
		o.rv = nil
	}
}
