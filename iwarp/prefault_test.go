package iwarp

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// resident counts the pages of b (page-aligned) that are in memory.
func resident(t *testing.T, b []byte) int {
	vec := make([]byte, (len(b)+int(pageSize)-1)/int(pageSize))
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, e, "mincore")
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestPrefault: prefault backs every whole page of a buffer, aligned or
// not, before anything touches it, and leaves the partial pages at its
// ends alone.
func TestPrefault(t *testing.T) {
	const pages = 16
	m, err := unix.Mmap(-1, 0, pages*int(pageSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer func() { _ = unix.Munmap(m) }()
	require.Zero(t, resident(t, m), "fresh anonymous memory")
	prefault(m[100 : len(m)-100]) // whole pages 1..pages-2
	require.Equal(t, pages-2, resident(t, m))
	prefault(m)
	require.Equal(t, pages, resident(t, m))
	prefault(m[:10]) // less than a page: nothing to do
	prefault(nil)
}
