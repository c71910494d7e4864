package shm

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Region is one connection's shared memory: a memfd holding two rings of
// the same data size, the first carrying what its maker sends. The maker
// seals it against shrinking before it goes to the peer: a peer that could
// shrink it would make the other side's next access a SIGBUS, that is, kill
// the application for a fault of the connection.
type Region struct {
	fd   int
	mem  []byte
	data int
}

// seals: size fixed for good (no shrink, no grow, no unsealing).
const seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// ErrUnsealed: the peer's region may shrink under the mapping.
var ErrUnsealed = errors.New("shm: region not sealed against shrinking")

func validData(data int) error {
	if data < MinData || data > MaxData || data&(data-1) != 0 {
		return fmt.Errorf("%w: %d data bytes per ring", ErrSize, data)
	}
	return nil
}

// Create makes a region with two rings of data bytes each (a power of
// two), sealed and mapped. Its pages are the kernel's until first written.
func Create(data int) (*Region, error) {
	if err := validData(data); err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("sdp-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	size := 2 * RingBytes(data)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: ftruncate: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: seal: %w", err)
	}
	return mapRegion(fd, true, size, data)
}

// Open maps a region the peer made (fd, received from it) with rings of
// data bytes each, as the two sides agreed: its size must be exactly that
// and its seals must forbid shrinking. fd stays the caller's.
func Open(fd, data int) (*Region, error) {
	if err := validData(data); err != nil {
		return nil, err
	}
	s, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: the peer's region: %w", err)
	}
	if s&unix.F_SEAL_SHRINK == 0 {
		return nil, ErrUnsealed
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: fstat: %w", err)
	}
	size := 2 * RingBytes(data)
	if st.Size != int64(size) {
		return nil, fmt.Errorf("%w: the peer's region has %d bytes, not %d", ErrSize, st.Size, size)
	}
	return mapRegion(fd, false, size, data)
}

// mapRegion maps size bytes of fd; the region keeps fd (and closes it on
// failure) when keep, as the maker of the region does.
func mapRegion(fd int, keep bool, size, data int) (*Region, error) {
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		if keep {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("shm: mmap: %w", err)
	}
	r := &Region{fd: -1, mem: mem, data: data}
	if keep {
		r.fd = fd
	}
	return r, nil
}

// Fd is the memfd of a region this side made, to pass to the peer; -1
// after CloseFd or for a region opened from the peer's descriptor.
func (r *Region) Fd() int { return r.fd }

// CloseFd closes the memfd once the peer has it; the mapping stays.
func (r *Region) CloseFd() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// ring returns ring i's memory.
func (r *Region) ring(i int) []byte {
	n := RingBytes(r.data)
	return r.mem[i*n : (i+1)*n : (i+1)*n]
}

// Ends returns this side's producer and consumer: the maker sends on the
// first ring and receives on the second, the peer the other way round.
func (r *Region) Ends(maker bool) (*Producer, *Consumer, error) {
	tx, rx := 0, 1
	if !maker {
		tx, rx = 1, 0
	}
	p, err := NewProducer(r.ring(tx))
	if err != nil {
		return nil, nil, err
	}
	c, err := NewConsumer(r.ring(rx))
	if err != nil {
		return nil, nil, err
	}
	return p, c, nil
}

// removePages gives a ring's data pages back to the kernel: the memfd's
// pages are freed, for every process that maps it, and read as zeros
// until written again.
func removePages(data []byte) error {
	if err := unix.Madvise(data, unix.MADV_REMOVE); err != nil {
		return fmt.Errorf("shm: madvise(MADV_REMOVE): %w", err)
	}
	return nil
}

// Resident is how many bytes of the region are in memory now.
func (r *Region) Resident() (int, error) {
	page := unix.Getpagesize()
	vec := make([]byte, (len(r.mem)+page-1)/page)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&r.mem[0])), uintptr(len(r.mem)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return 0, fmt.Errorf("shm: mincore: %w", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n * page, nil
}

// Close unmaps the region (and closes its memfd if still open); its ends
// must not be used afterwards.
func (r *Region) Close() error {
	err := r.CloseFd()
	if r.mem != nil {
		if e := unix.Munmap(r.mem); err == nil {
			err = e
		}
		r.mem = nil
	}
	return err
}
