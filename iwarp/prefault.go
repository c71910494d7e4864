package iwarp

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = uintptr(os.Getpagesize())

// prefault backs b's whole pages with memory now, in one system call,
// instead of one page fault per page when recv first copies into them. A
// fresh process (a curl that fetches one file) fills its first receive
// chunks from fresh heap, and in a virtual machine a fault can cost tens
// of microseconds: a 256 KiB chunk filled by faults costs milliseconds,
// populated at once a tenth of that (docs/PERFORMANCE.md). A kernel
// without MADV_POPULATE_WRITE (before 5.14) refuses it, and the faults
// happen as before.
func prefault(b []byte) {
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first := (start + pageSize - 1) &^ (pageSize - 1)
	end := (start + uintptr(len(b))) &^ (pageSize - 1)
	if end <= first {
		return
	}
	off := first - start
	_ = unix.Madvise(b[off:off+(end-first)], unix.MADV_POPULATE_WRITE)
}
