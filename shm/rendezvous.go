package shm

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The rendezvous proves that two ends of a connection share a host and a
// network namespace, and carries the region between them. The passive side
// listens on an abstract Unix socket (abstract names belong to a network
// namespace and need no file, so peers of different users reach them) whose
// name is 16 random bytes it sends only inside the connection already
// established; the active side connects to that name, which only a process
// in the same namespace can do, and hands over its region's memfd with
// SCM_RIGHTS. SO_PEERCRED tells each side the other's pid and uid.

// NameLen is the length of a rendezvous name's random part.
const NameLen = 16

// Name is a rendezvous's name as it travels in the connection.
type Name [NameLen]byte

func (n Name) sockaddr() *unix.SockaddrUnix {
	// A leading '@' is Go's spelling of the abstract namespace's NUL.
	return &unix.SockaddrUnix{Name: "@libsdp-" + hex.EncodeToString(n[:])}
}

// Rendezvous is the passive side's listening socket.
type Rendezvous struct {
	fd   int
	Name Name
	// early is the peer that connected before Refuse, for Accept.
	early *Peer
}

// ErrTimeout: the peer did not arrive in time.
var ErrTimeout = errors.New("shm: rendezvous timed out")

// ErrOffer: the peer's message is not one region descriptor and its size.
var ErrOffer = errors.New("shm: the peer sent no valid region")

// Listen opens a rendezvous under a fresh random name.
func Listen() (*Rendezvous, error) {
	r := &Rendezvous{fd: -1}
	if err := randomName(&r.Name); err != nil {
		return nil, fmt.Errorf("shm: rendezvous name: %w", err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: rendezvous socket: %w", err)
	}
	if err := unix.Bind(fd, r.Name.sockaddr()); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: rendezvous bind: %w", err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: rendezvous listen: %w", err)
	}
	r.fd = fd
	return r, nil
}

// randomName fills n from the kernel's random source (getrandom(2), what
// crypto/rand reads too): the engine loads into every preloaded process on
// its first connection, and crypto/rand would bring the whole FIPS module's
// initialisation into that start. It makes the system call itself:
// unix.Getrandom goes through the vDSO, whose per-thread state the runtime
// maps at a thread's first call, and in a fresh process that mapping (with
// its page faults and the TLB shootdowns a threaded process pays for them)
// took about a tenth of a millisecond of the first connection's set-up.
func randomName(n *Name) error {
	for got := 0; got < len(n); {
		r, _, errno := unix.Syscall(unix.SYS_GETRANDOM, uintptr(unsafe.Pointer(&n[got])), uintptr(len(n)-got), 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		got += int(r)
	}
	return nil
}

// waitFd waits up to timeout for events on fd.
func waitFd(fd int, events int16, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		left := time.Until(end)
		if left <= 0 {
			return ErrTimeout
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Poll(pfd, int((left+time.Millisecond-1)/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("shm: poll: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}

// Accept waits up to timeout for the peer and returns its end.
func (r *Rendezvous) Accept(timeout time.Duration) (*Peer, error) {
	if p := r.early; p != nil {
		r.early = nil
		return p, nil
	}
	for {
		fd, _, err := unix.Accept4(r.fd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		if err == nil {
			return newPeer(fd)
		}
		if err != unix.EAGAIN && err != unix.EINTR {
			return nil, fmt.Errorf("shm: rendezvous accept: %w", err)
		}
		if err := waitFd(r.fd, unix.POLLIN, timeout); err != nil {
			return nil, err
		}
	}
}

// Refuse makes the rendezvous refuse every connection from now on (the
// peer's Dial fails with ECONNREFUSED) and reports whether a peer had
// connected before; Accept returns that one. The kernel orders a connect
// and the shutdown of the listening socket, so a peer either came before
// (it is in the queue) or is refused: one decision both sides see.
func (r *Rendezvous) Refuse() (came bool, err error) {
	if r.early != nil {
		return true, nil
	}
	if err := unix.Shutdown(r.fd, unix.SHUT_RDWR); err != nil {
		return false, fmt.Errorf("shm: rendezvous shutdown: %w", err)
	}
	for {
		fd, _, err := unix.Accept4(r.fd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN || err == unix.EINVAL:
			return false, nil // nobody came, and nobody can now
		case err != nil:
			return false, fmt.Errorf("shm: rendezvous accept: %w", err)
		}
		p, err := newPeer(fd)
		if err != nil {
			return true, err // it came: its doorbell follows all the same
		}
		r.early = p
		return true, nil
	}
}

// Fd is the listening socket (for a host that keeps its descriptors apart).
func (r *Rendezvous) Fd() int { return r.fd }

// Move lets the host put the listening socket elsewhere: to returns the
// descriptor that replaces fd (a duplicate, fd closed) or fd itself.
func (r *Rendezvous) Move(to func(fd int) int) { r.fd = to(r.fd) }

// Close closes the rendezvous: nobody can reach its name afterwards.
func (r *Rendezvous) Close() error {
	if r.early != nil {
		r.early.Close()
		r.early = nil
	}
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// Peer is one end of a rendezvous connection.
type Peer struct {
	fd int
	// Cred is the other process's pid, uid and gid, from the kernel.
	Cred unix.Ucred
}

func newPeer(fd int) (*Peer, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: SO_PEERCRED: %w", err)
	}
	return &Peer{fd: fd, Cred: *cred}, nil
}

// Dial connects to the rendezvous name: it fails (ECONNREFUSED) unless its
// listener is in this network namespace.
func Dial(name Name) (*Peer, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: rendezvous socket: %w", err)
	}
	// A Unix connect completes at once or fails; EAGAIN is a full backlog.
	if err := unix.Connect(fd, name.sockaddr()); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: rendezvous connect: %w", err)
	}
	return newPeer(fd)
}

// offerLen is an offer's bytes: the data size of each ring (uint32 little endian).
const offerLen = 4

// SendRegion hands the region's memfd and ring size to the peer.
func (p *Peer) SendRegion(r *Region) error {
	if r.Fd() < 0 {
		return errors.New("shm: the region's descriptor is closed")
	}
	var msg [offerLen]byte
	binary.LittleEndian.PutUint32(msg[:], uint32(r.data))
	for {
		err := unix.Sendmsg(p.fd, msg[:], unix.UnixRights(r.Fd()), nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("shm: send the region: %w", err)
			}
			return nil
		}
	}
}

// RecvRegion waits up to timeout for the peer's region and opens it: one
// descriptor, sealed, of the size it names, and that size the one wanted
// (0: any valid size). Whatever else came with it is closed.
func (p *Peer) RecvRegion(want int, timeout time.Duration) (*Region, error) {
	var msg [offerLen + 1]byte
	oob := make([]byte, unix.CmsgSpace(4*4)) // room for a few descriptors, to close them
	for {
		n, oobn, flags, _, err := unix.Recvmsg(p.fd, msg[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EAGAIN || err == unix.EINTR {
			if err := waitFd(p.fd, unix.POLLIN, timeout); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("shm: receive the region: %w", err)
		}
		fds, perr := rights(oob[:oobn])
		r, err := openOffer(msg[:n], fds, perr, flags, want)
		closeAll(fds) // the mapping stays
		return r, err
	}
}

// openOffer checks one received offer (the message, its descriptors, the
// flags recvmsg returned) and opens the region it names.
func openOffer(msg []byte, fds []int, perr error, flags, want int) (*Region, error) {
	if perr != nil || len(fds) != 1 || len(msg) != offerLen || flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 {
		return nil, ErrOffer
	}
	data := int(binary.LittleEndian.Uint32(msg))
	if want != 0 && data != want {
		return nil, fmt.Errorf("%w: rings of %d bytes, not %d", ErrOffer, data, want)
	}
	return Open(fds[0], data)
}

// rights returns every descriptor in the control messages.
func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		f, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return fds, err
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// Close closes this end.
func (p *Peer) Close() error {
	if p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}
