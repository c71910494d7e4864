// Command allops runs every RDMAP opcode this package implements over one
// loopback TCP connection, so that a capture of it can be checked by an
// independent decoder (scripts/wirecheck.sh runs it under tcpdump and has
// tshark decode the result).
//
// The accepting side is the MPA initiator, as in libsdp. After the
// exchange it sends, and the connecting side answers, in this order:
// Send, Send with SE, Send with Invalidate, Send with SE and Invalidate,
// RDMA Write (several FPDUs), RDMA Read Request and its Read Responses
// (both ways), Immediate Data and Immediate Data with SE, and finally a
// Terminate for an RDMA Write to an STag that does not exist. Every transfer is checked at its destination; the command
// exits 1 on any difference or protocol fault.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"libsdp/iwarp"
)

type peer struct {
	name string
	qp   *iwarp.QP
	segs []iwarp.DDPSegment
	comp []iwarp.Completion
	err  error
}

func main() {
	port := flag.Int("port", 0, "TCP port to listen on at 127.0.0.1 (0: any)")
	markers := flag.Bool("markers", true, "ask for MPA markers in both directions")
	crc := flag.Bool("crc", true, "ask for the MPA CRC")
	emss := flag.Int("mss", 1448, "segment size the FPDUs are cut for (0: the socket's TCP_MAXSEG)")
	rev := flag.Int("rev", 1, "MPA revision; 2 adds the RFC 6581 IRD/ORD block and a zero-length RDMA Write as ready-to-receive message")
	flag.Parse()
	if err := run(*port, *markers, *crc, *emss, uint8(*rev)); err != nil {
		fmt.Fprintln(os.Stderr, "allops:", err)
		os.Exit(1)
	}
}

func run(port int, markers, crc bool, emss int, rev uint8) error {
	afd, cfd, err := connect(port)
	if err != nil {
		return err
	}
	defer unix.Close(afd)
	defer unix.Close(cfd)
	deadline := time.Now().Add(20 * time.Second)
	a := &peer{name: "accepting side", qp: iwarp.NewQP(afd)}
	c := &peer{name: "connecting side", qp: iwarp.NewQP(cfd)}

	// MPA: the accepting side is the initiator.
	icfg := iwarp.MPAConfig{Markers: markers, CRC: crc, Rev: rev, PrivateData: []byte("libsdp allops")}
	rcfg := iwarp.MPAConfig{Markers: markers, CRC: crc, Rev: rev}
	if rev >= 2 {
		icfg.PeerToPeer, icfg.RTR = true, iwarp.RTRWrite|iwarp.RTRRead
		rcfg.PeerToPeer, rcfg.RTR = true, iwarp.RTRWrite
	}
	ini, err := iwarp.NewMPAInitiator(icfg)
	if err != nil {
		return err
	}
	res, err := iwarp.NewMPAResponder(rcfg)
	if err != nil {
		return err
	}
	a.qp.WriteRaw(ini.Out())
	for _, st := range []struct {
		p *peer
		n *iwarp.MPANegotiation
	}{{c, res}, {a, ini}} {
		for !st.n.Done() {
			if err := flushBoth(a, c, deadline); err != nil {
				return err
			}
			used, err := st.n.Feed(st.p.qp.Raw())
			if err == nil {
				st.p.qp.ConsumeRaw(used)
				break
			}
			if err != iwarp.ErrNeedMore {
				return fmt.Errorf("%s: MPA: %w", st.p.name, err)
			}
			if err := wait(st.p, unix.POLLIN, deadline); err != nil {
				return err
			}
			if _, err := st.p.qp.Fill(); err != nil && err != unix.EAGAIN {
				return err
			}
		}
		if out := st.n.Out(); len(out) > 0 {
			st.p.qp.WriteRaw(out)
		}
	}
	ir, _ := ini.Result()
	rr, _ := res.Result()
	if emss == 0 {
		emss = min(mss(afd), mss(cfd))
	}
	a.qp.StartFullOperation(ir.TxMarkers, ir.RxMarkers, ir.CRC, 0, emss)
	c.qp.StartFullOperation(rr.TxMarkers, rr.RxMarkers, rr.CRC, 0, emss)
	if ir.Enhanced {
		a.qp.SetReadLimits(ir.IRD, ir.ORD)
		c.qp.SetReadLimits(rr.IRD, rr.ORD)
	}
	if ir.RTR != 0 {
		// The initiator's first FPDU is the RTR; the responder sends
		// nothing before it has arrived (the first step only answers).
		c.qp.ExpectRTR(rr.RTR)
		if err := a.qp.PostRTR(ir.RTR); err != nil {
			return err
		}
	}

	steps := []func() error{
		func() error { return sends(a, c, deadline) },
		func() error { return invalidates(a, c, deadline) },
		func() error { return write(a, c, deadline) },
		func() error { return read(a, c, deadline) },
		func() error { return read(c, a, deadline) },
		func() error { return immediates(c, a, deadline) },
		func() error { return terminate(a, c, deadline) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	if c.qp.RTRPending() {
		return errors.New("connecting side: the RTR never arrived")
	}
	fmt.Printf("allops: every opcode carried (MPA revision %d, RTR %v, markers %t, CRC %t); %d FPDUs, %d markers sent by the accepting side, %d FPDUs by the connecting side\n",
		ir.Rev, ir.RTR, ir.TxMarkers, ir.CRC, a.qp.TxStats().FPDUs, a.qp.TxStats().Markers, c.qp.TxStats().FPDUs)
	return nil
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*13) + byte(i>>8)
	}
	return b
}

// sends: the first FPDU of Full Operation comes from the initiator (RFC
// 5044 §7.1.2), then the responder answers.
func sends(a, c *peer, deadline time.Time) error {
	big := pattern(20000, 1)
	a.qp.PostSend(iwarp.OpSend, []byte("Send from the initiator"))
	a.qp.PostSend(iwarp.OpSendSE, big)
	if err := until(a, c, deadline, func() bool { return lastMSN(c) == 2 }); err != nil {
		return err
	}
	c.qp.PostSend(iwarp.OpSend, []byte("Send from the responder"))
	if err := until(a, c, deadline, func() bool { return lastMSN(a) == 1 }); err != nil {
		return err
	}
	if m := join(c.segs[1:]); !bytes.Equal(m, big) {
		return fmt.Errorf("Send with SE: %d octets arrived differ from the %d sent", len(m), len(big))
	}
	a.segs, c.segs = nil, nil
	return nil
}

func invalidates(a, c *peer, deadline time.Time) error {
	s1, err := c.qp.Register(make([]byte, 64), iwarp.AccessRemoteWrite|iwarp.AccessRemoteInvalidate)
	if err != nil {
		return err
	}
	s2, err := c.qp.Register(make([]byte, 64), iwarp.AccessRemoteRead|iwarp.AccessRemoteInvalidate)
	if err != nil {
		return err
	}
	a.qp.PostSendInvalidate(false, s1, []byte("done with the first region"))
	a.qp.PostSendInvalidate(true, s2, []byte("done with the second region"))
	if err := until(a, c, deadline, func() bool { return len(c.segs) == 2 }); err != nil {
		return err
	}
	if c.qp.Mem().Valid(s1) || c.qp.Mem().Valid(s2) {
		return errors.New("Send with Invalidate left its STag valid")
	}
	c.segs = nil
	return nil
}

func write(a, c *peer, deadline time.Time) error {
	region := make([]byte, 100000)
	stag, err := c.qp.Register(region, iwarp.AccessRemoteWrite)
	if err != nil {
		return err
	}
	data := pattern(90000, 7)
	a.qp.PostWrite(stag, 5000, data)
	a.qp.PostSend(iwarp.OpSend, []byte("written"))
	if err := until(a, c, deadline, func() bool { return len(c.segs) == 1 }); err != nil {
		return err
	}
	if !bytes.Equal(region[5000:95000], data) {
		return errors.New("RDMA Write: the region does not hold the data")
	}
	c.qp.Invalidate(stag)
	c.segs = nil
	return nil
}

// read has p read from q's memory.
func read(p, q *peer, deadline time.Time) error {
	src := pattern(70000, 3)
	srcTag, err := q.qp.Register(src, iwarp.AccessRemoteRead)
	if err != nil {
		return err
	}
	sink := make([]byte, len(src))
	sinkTag, err := p.qp.Register(sink, iwarp.AccessLocalWrite)
	if err != nil {
		return err
	}
	if _, err := p.qp.PostReadRequest(iwarp.ReadRequest{SinkSTag: uint32(sinkTag), Size: uint32(len(src)), SrcSTag: uint32(srcTag)}); err != nil {
		return err
	}
	p.comp = nil
	if err := until(p, q, deadline, func() bool { return len(p.comp) == 1 }); err != nil {
		return err
	}
	if !bytes.Equal(sink, src) {
		return errors.New("RDMA Read: the sink does not hold the source's data")
	}
	p.qp.Invalidate(sinkTag)
	q.qp.Invalidate(srcTag)
	return nil
}

func immediates(p, q *peer, deadline time.Time) error {
	p.qp.PostImmediate(false, [8]byte{'i', 'm', 'm', 'e', 'd', 'i', 'a', 't'})
	p.qp.PostImmediate(true, [8]byte{'s', 'o', 'l', 'i', 'c', 'i', 't', '!'})
	if err := until(p, q, deadline, func() bool { return len(q.segs) == 2 }); err != nil {
		return err
	}
	if q.segs[0].Opcode() != iwarp.OpImmediate || q.segs[1].Opcode() != iwarp.OpImmediateSE || string(q.segs[1].Payload) != "solicit!" {
		return errors.New("Immediate Data arrived wrong")
	}
	q.segs = nil
	return nil
}

// terminate has a write to a region c never registered; c finds the fault
// and answers with a Terminate that carries the offending DDP header, as a
// real protection fault does. (A fault in a Read Request would carry its
// 18-octet untagged header and the Read Request header too, which is what
// RFC 5040 §4.8 and Linux siw do; tshark 4.0 sizes the terminated DDP header
// by the error type instead of by its T bit and so shows such a Terminate
// shifted, without flagging it, so the capture uses the tagged case.)
func terminate(a, c *peer, deadline time.Time) error {
	a.qp.PostWrite(0x7f00, 0, []byte("no such region"))
	err := until(a, c, deadline, func() bool { return false })
	var fault *iwarp.Error
	if !errors.As(err, &fault) || c.qp.Fault() == nil {
		return fmt.Errorf("a write to an unregistered STag gave %v, want a tagged buffer fault", err)
	}
	c.qp.PostTerminate(fault)
	if err := until(a, c, deadline, func() bool { return len(a.segs) == 1 }); err != nil {
		return err
	}
	if a.segs[0].Opcode() != iwarp.OpTerminate {
		return fmt.Errorf("got %v, want a Terminate", a.segs[0].Opcode())
	}
	t, err := iwarp.ParseTerminate(a.segs[0].Payload)
	if err != nil || t.Layer != iwarp.LayerDDP || t.EType != iwarp.DDPErrTypeTagged || t.Code != iwarp.DDPErrInvalidSTag || !t.D {
		return fmt.Errorf("Terminate %v (%v) does not report the protection fault", t.TerminateCtrl, err)
	}
	return nil
}

func lastMSN(p *peer) uint32 {
	if n := len(p.segs); n > 0 && p.segs[n-1].Last {
		return p.segs[n-1].MSN
	}
	return 0
}

func join(segs []iwarp.DDPSegment) []byte {
	var b []byte
	for _, s := range segs {
		b = append(b, s.Payload...)
	}
	return b
}

// until drives both peers until done, a fault, or the deadline.
func until(a, b *peer, deadline time.Time, done func() bool) error {
	for !done() {
		if err := flushBoth(a, b, deadline); err != nil {
			return err
		}
		for _, p := range []*peer{a, b} {
			if err := p.receive(); err != nil {
				return err
			}
		}
		if done() {
			return nil
		}
		if a.qp.TxPending() > 0 || b.qp.TxPending() > 0 {
			continue // answers queued while receiving go out at once
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		pfd := []unix.PollFd{{Fd: int32(a.qp.Fd()), Events: unix.POLLIN}, {Fd: int32(b.qp.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, 100); err != nil && err != unix.EINTR {
			return err
		}
	}
	return nil
}

func (p *peer) receive() error {
	if !p.qp.Full() || p.qp.Fault() != nil {
		return nil // the MPA exchange reads for itself
	}
	for {
		_, err := p.qp.Fill()
		if err == unix.EAGAIN {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		for {
			seg, err := p.qp.NextSegment()
			if err == iwarp.ErrNeedMore {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			s := seg.DDPSegment
			s.Payload = append([]byte(nil), seg.Payload...)
			seg.Release()
			p.segs = append(p.segs, s)
		}
		p.comp = p.qp.PollCompletions(p.comp)
	}
}

// flushBoth writes everything both peers queued.
func flushBoth(a, b *peer, deadline time.Time) error {
	for _, p := range []*peer{a, b} {
		for {
			err := p.qp.Flush()
			if err == nil {
				break
			}
			if err != unix.EAGAIN {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			// The peer may need to read before there is room.
			other := a
			if p == a {
				other = b
			}
			if err := other.receive(); err != nil {
				return err
			}
			if err := wait(p, unix.POLLOUT, deadline); err != nil {
				return err
			}
		}
	}
	return nil
}

func wait(p *peer, ev int16, deadline time.Time) error {
	if time.Now().After(deadline) {
		return fmt.Errorf("%s: timed out", p.name)
	}
	pfd := []unix.PollFd{{Fd: int32(p.qp.Fd()), Events: ev}}
	if _, err := unix.Poll(pfd, 100); err != nil && err != unix.EINTR {
		return err
	}
	return nil
}

func mss(fd int) int {
	m, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_MAXSEG)
	if err != nil || m <= 0 {
		return 1448
	}
	return m
}

// connect returns the accepted and the connecting end of a loopback
// connection to port on 127.0.0.1, both non-blocking.
func connect(port int) (int, int, error) {
	l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, err
	}
	defer unix.Close(l)
	_ = unix.SetsockoptInt(l, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(l, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return -1, -1, err
	}
	if err := unix.Listen(l, 1); err != nil {
		return -1, -1, err
	}
	sa, err := unix.Getsockname(l)
	if err != nil {
		return -1, -1, err
	}
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, err
	}
	if err := unix.Connect(c, sa); err != nil {
		unix.Close(c)
		return -1, -1, err
	}
	a, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
	if err != nil {
		unix.Close(c)
		return -1, -1, err
	}
	for _, fd := range []int{a, c} {
		_ = unix.SetNonblock(fd, true)
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	return a, c, nil
}
