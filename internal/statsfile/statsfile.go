// Package statsfile is the format and the file handling shared by the
// engine, which publishes a snapshot of its process's sockets, and sdpstat,
// which reads them.
//
// Each process with the engine loaded keeps one JSON document, <pid>.json,
// in a directory private to its user (Dir). The file is replaced
// atomically (written under a temporary name, then renamed), so a reader
// never sees half a snapshot. A file whose process is gone, or whose pid
// now belongs to another process, is stale: readers ignore and remove it.
//
// Only raw system calls are used (golang.org/x/sys/unix and the os
// package): the engine runs inside programs whose libc socket functions are
// interposed, and must not call them.
package statsfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Version is the format version written in every file. Readers skip files
// of another version rather than misread them.
const Version = 1

// maxFile bounds what a reader loads from one file.
const maxFile = 64 << 20

// Process is one process's snapshot.
type Process struct {
	Version int    `json:"version"`
	PID     int    `json:"pid"`
	Prog    string `json:"prog"`
	// StartTicks is field 22 of /proc/<pid>/stat (start time in clock ticks
	// after boot): with the pid it names the process, so a file left by a
	// dead process whose pid was reused is recognised.
	StartTicks uint64 `json:"start_ticks"`
	// Exe is the process's executable (/proc/<pid>/exe) when the engine
	// started: after an exec into another program, whose image may never
	// load the engine, pid and start time still match but Exe does not.
	Exe string `json:"exe,omitempty"`
	// EngineLoaded is true in every file the engine writes; readers that
	// find a preloaded process without one (sdpstat scans /proc) leave it
	// false.
	EngineLoaded bool `json:"engine_loaded"`
	// UpdatedMs is when the snapshot was taken, in Unix milliseconds.
	UpdatedMs int64 `json:"updated_unix_ms"`
	// Totals are the process's engine counters, closed connections included
	// (the same keys as the SDP_STATS line).
	Totals  map[string]uint64 `json:"totals,omitempty"`
	Sockets []Socket          `json:"sockets"`
}

// Socket is one socket of the process.
type Socket struct {
	FD int `json:"fd"`
	// Kind is the interposer's view: socket (nothing decided yet), tcp,
	// listen, connecting, connected, accepted, sdp, or closing (closed by
	// the application, the engine still finishing the SDP close).
	Kind string `json:"kind"`
	// Transport is sdp, tcp, tcp+sdp (a listener: both ports) or - (not
	// decided yet).
	Transport string `json:"transport"`
	// Reason says why a socket runs over TCP (refused, timeout, foreign,
	// plain-peer, rule, ...); empty otherwise.
	Reason string `json:"reason,omitempty"`
	// Local and Remote are the addresses as the application sees them.
	Local  string `json:"local"`
	Remote string `json:"remote"`
	// SDPPort is a listener's hidden SDP port.
	SDPPort int `json:"sdp_port,omitempty"`
	// State is the kernel's TCP state of the socket (established, listen,
	// close-wait, ...).
	State string `json:"state"`
	// SDP is present for connections the engine drives.
	SDP *SDP `json:"sdp,omitempty"`
}

// SDP is the engine's view of one SDP connection.
type SDP struct {
	// State: handshake (Hello/HelloAck not done), up, or closing.
	State string `json:"state"`
	// Link is what carries the connection's messages: iwarp (FPDUs over
	// its TCP socket) or shm (shared memory with a peer on this host);
	// ShmNote says why not shm where this side allowed it.
	Link    string `json:"link,omitempty"`
	ShmNote string `json:"shm_note,omitempty"`
	// FlowControl is the mode agreed with the peer (credit, rdma, nic,
	// transport); Buffering (separate, integrated) and Progress (inline,
	// async) are this end's.
	FlowControl string `json:"flow_control"`
	Buffering   string `json:"buffering"`
	Progress    string `json:"progress"`
	Markers     bool   `json:"markers"`
	CRC         bool   `json:"crc"`

	PayloadTx  uint64 `json:"payload_tx"`
	PayloadRx  uint64 `json:"payload_rx"`
	WireTx     uint64 `json:"wire_tx"`
	WireRx     uint64 `json:"wire_rx"`
	MsgsTx     uint64 `json:"msgs_tx"`
	MsgsRx     uint64 `json:"msgs_rx"`
	FPDUsTx    uint64 `json:"fpdus_tx"`
	FPDUsRx    uint64 `json:"fpdus_rx"`
	MarkersTx  uint64 `json:"markers_tx"`
	MarkersRx  uint64 `json:"markers_rx"`
	CRCBytesRx uint64 `json:"crc_bytes_rx"`
	CRCErrors  uint64 `json:"crc_errors"`
	BCopyTx    uint64 `json:"bcopy_bytes_tx"`
	BCopyRx    uint64 `json:"bcopy_bytes_rx"`
	ZCopyTx    uint64 `json:"zcopy_bytes_tx"`
	ZCopyRx    uint64 `json:"zcopy_bytes_rx"`
	// BCopySends counts Data messages (ring writes in rdma/nic) sent;
	// ZCopySends the SrcAvail offers (Read ZCopy), ZCopyCancels those
	// withdrawn because the sink did not read.
	BCopySends   uint64 `json:"bcopy_sends"`
	ZCopySends   uint64 `json:"zcopy_sends"`
	ZCopyCancels uint64 `json:"zcopy_cancels"`
	// Write ZCopy: SinkAvail offers made (ZCopySinkAvails), RDMA Writes
	// made into the peer's (ZCopyWriteSends), and of ZCopyRx the bytes
	// the peer wrote into ours (ZCopyWriteRx).
	ZCopySinkAvails uint64 `json:"zcopy_sink_avails"`
	ZCopyWriteSends uint64 `json:"zcopy_write_sends"`
	ZCopyWriteRx    uint64 `json:"zcopy_write_bytes_rx"`
	// TxRecords are the runs of FPDUs handed to the kernel as one record.
	TxRecords uint64 `json:"tx_records"`
	// RingAcks are rdma/nic messages sent only to return ring space;
	// DirectRx the payload bytes placed from the socket straight into
	// their destination.
	RingAcks      uint64 `json:"ring_acks"`
	DirectRx      uint64 `json:"direct_placed_rx"`
	CreditUpdates uint64 `json:"credit_updates"`
	CreditStalls  uint64 `json:"credit_stalls"`
	Coalesced     uint64 `json:"coalesced_sends"`
	UserCopiesTx  uint64 `json:"user_copies_tx"`
	UserCopiesRx  uint64 `json:"user_copies_rx"`
	// CopiesPerByteTx/Rx are the bytes copied in user space per payload
	// byte: 1 for buffer copy on each side, 0 for zero copy.
	CopiesPerByteTx float64 `json:"copies_per_byte_tx"`
	CopiesPerByteRx float64 `json:"copies_per_byte_rx"`
}

// SetCopiesPerByte fills the per-byte ratios from the counters.
func (s *SDP) SetCopiesPerByte() {
	s.CopiesPerByteTx = ratio(s.UserCopiesTx, s.PayloadTx)
	s.CopiesPerByteRx = ratio(s.UserCopiesRx, s.PayloadRx)
}

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Dir returns the directory of uid's files: libsdp-<uid> under /dev/shm
// (memory, never on disk), or under $XDG_RUNTIME_DIR or the temporary
// directory where there is no /dev/shm.
func Dir(uid int) string {
	return filepath.Join(baseDir(), dirName(uid))
}

func dirName(uid int) string { return "libsdp-" + strconv.Itoa(uid) }

func baseDir() string {
	if isDir("/dev/shm") {
		return "/dev/shm"
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) && isDir(x) {
		return x
	}
	return os.TempDir()
}

func isDir(p string) bool {
	var st unix.Stat_t
	return unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// AllDirs returns the directories of every user under the base directory,
// with the uid each belongs to; only a privileged reader can open others'.
func AllDirs() map[int]string {
	base := baseDir()
	out := map[int]string{}
	names, err := dirNames(base)
	if err != nil {
		return out
	}
	for _, name := range names {
		s, ok := strings.CutPrefix(name, "libsdp-")
		if !ok {
			continue
		}
		if uid, err := strconv.Atoi(s); err == nil && uid >= 0 && dirName(uid) == name {
			out[uid] = filepath.Join(base, name)
		}
	}
	return out
}

// EnsureDir creates dir (mode 0700) if it is missing and checks that it is
// fit to use: a real directory, not a symbolic link, owned by uid, with no
// access for anyone else. Another user could have created it first in a
// shared base directory; then it is refused, never used.
func EnsureDir(dir string, uid int) error {
	err := unix.Mkdir(dir, 0o700)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("statsfile: create %s: %w", dir, err)
	}
	return CheckDir(dir, uid)
}

// CheckDir checks dir as EnsureDir does, without creating it.
func CheckDir(dir string, uid int) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("statsfile: %s: %w", dir, err)
	}
	return checkDirStat(dir, &st, uid)
}

func checkDirStat(dir string, st *unix.Stat_t, uid int) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("statsfile: %s is not a directory", dir)
	case int(st.Uid) != uid:
		return fmt.Errorf("statsfile: %s belongs to uid %d, not %d", dir, st.Uid, uid)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("statsfile: %s is accessible to others (mode %o)", dir, st.Mode&0o777)
	}
	return nil
}

// FileName is the name of pid's file in its directory.
func FileName(pid int) string { return strconv.Itoa(pid) + ".json" }

func tmpName(pid int) string { return "." + strconv.Itoa(pid) + ".tmp" }

// Write replaces pid's file in dir with data. The directory is opened
// without following links and checked again on every write, and the file
// is created exclusively under a temporary name (mode 0600, never through a
// link) and renamed over the old one, so readers see either snapshot whole.
// No descriptor is kept between writes: the application may close
// descriptors it does not know.
func Write(dir string, uid, pid int, data []byte) error {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("statsfile: open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return fmt.Errorf("statsfile: %s: %w", dir, err)
	}
	if err := checkDirStat(dir, &st, uid); err != nil {
		return err
	}
	tmp := tmpName(pid)
	const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dfd, tmp, flags, 0o600)
	if errors.Is(err, unix.EEXIST) {
		// Left by an earlier process with this pid, or by a write of ours
		// cut short: the directory is ours alone, so it can go.
		_ = unix.Unlinkat(dfd, tmp, 0)
		fd, err = unix.Openat(dfd, tmp, flags, 0o600)
	}
	if err != nil {
		return fmt.Errorf("statsfile: create %s/%s: %w", dir, tmp, err)
	}
	for rest := data; len(rest) > 0; {
		n, werr := unix.Write(fd, rest)
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			unix.Close(fd)
			_ = unix.Unlinkat(dfd, tmp, 0)
			return fmt.Errorf("statsfile: write %s/%s: %w", dir, tmp, werr)
		}
		rest = rest[n:]
	}
	if err := unix.Close(fd); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("statsfile: write %s/%s: %w", dir, tmp, err)
	}
	if err := unix.Renameat(dfd, tmp, dfd, FileName(pid)); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("statsfile: rename %s/%s: %w", dir, tmp, err)
	}
	return nil
}

// Remove removes pid's file (and a temporary file of pid) from dir.
func Remove(dir string, pid int) {
	_ = unix.Unlink(filepath.Join(dir, FileName(pid)))
	_ = unix.Unlink(filepath.Join(dir, tmpName(pid)))
}

// StartTicks returns field 22 of /proc/<pid>/stat, the process's start time
// in clock ticks after boot.
func StartTicks(pid int) (uint64, error) {
	b, err := readPath("/proc/"+strconv.Itoa(pid)+"/stat", 1<<16)
	if err != nil {
		return 0, err
	}
	return parseStartTicks(b)
}

// parseStartTicks reads field 22 of a /proc/<pid>/stat line. The command
// name (field 2) is in parentheses and may itself contain spaces and
// parentheses, so the fields are counted from the last ')'.
func parseStartTicks(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("statsfile: malformed /proc stat line")
	}
	// After ")": field 3 (state) onwards; field 22 is the 20th of them.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, errors.New("statsfile: short /proc stat line")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Alive reports whether the process pid that started at startTicks still
// runs. A pid that exists but started at another time is another process.
func Alive(pid int, startTicks uint64) bool {
	if pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); err == unix.ESRCH {
		return false
	}
	t, err := StartTicks(pid)
	if err != nil {
		// No /proc entry: the process is gone (or /proc is not mounted,
		// and then kill said it exists).
		return !errors.Is(err, os.ErrNotExist) || !isDir("/proc/self")
	}
	return t == startTicks
}

// Exe returns the executable of process pid.
func Exe(pid int) string {
	buf := make([]byte, 4096)
	n, err := unix.Readlink("/proc/"+strconv.Itoa(pid)+"/exe", buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// sameExe reports whether pid still runs exe; when either is unknown (a
// reader without the right to look), it does not rule the file out.
func sameExe(pid int, exe string) bool {
	now := Exe(pid)
	return exe == "" || now == "" || now == exe
}

// Entry is one process's file as a reader found it.
type Entry struct {
	Process
	Path string
	// Age is how long ago the snapshot was taken. The engine refreshes it
	// about twice a second; a larger age means the process is stopped or
	// its engine no longer runs (after an exec into a program that never
	// loaded it).
	Age time.Duration
}

// Load reads every process file of dir, newest format only. Files of
// processes that are gone (Alive false) are skipped and, when clean is
// set, removed, together with their temporary files. Files that cannot be
// read or parsed are reported in errs and skipped.
func Load(dir string, clean bool, now time.Time) (out []Entry, errs []error) {
	names, err := dirNames(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, []error{err}
	}
	for _, name := range names {
		if strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") {
			pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "."), ".tmp"))
			if err == nil && clean && unix.Kill(pid, 0) == unix.ESRCH {
				_ = unix.Unlink(filepath.Join(dir, name))
			}
			continue
		}
		pidStr, ok := strings.CutSuffix(name, ".json")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || FileName(pid) != name {
			continue
		}
		path := filepath.Join(dir, name)
		p, err := readFile(path)
		if err != nil {
			if clean && unix.Kill(pid, 0) == unix.ESRCH {
				_ = unix.Unlink(path)
				continue
			}
			errs = append(errs, err)
			continue
		}
		if p.Version != Version {
			errs = append(errs, fmt.Errorf("%s: format version %d, this reader knows %d", path, p.Version, Version))
			continue
		}
		if p.PID != pid || !Alive(pid, p.StartTicks) || !sameExe(pid, p.Exe) {
			if clean {
				_ = unix.Unlink(path)
			}
			continue
		}
		out = append(out, Entry{Process: *p, Path: path, Age: now.Sub(time.UnixMilli(p.UpdatedMs))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, errs
}

// Clean removes dir's files of processes that are gone.
func Clean(dir string) { Load(dir, true, time.Now()) }

// The engine runs inside other programs, so this package reads files with
// plain system calls: the os package's files would start the Go runtime's
// poller, whose epoll and eventfd descriptors an application that closes
// every descriptor it does not know would take away.

// readAll reads fd to its end, at most max bytes.
func readAll(fd int, max int64) ([]byte, error) {
	var out []byte
	buf := make([]byte, 16<<10)
	for int64(len(out)) <= max {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
	return nil, fmt.Errorf("more than %d bytes", max)
}

// readPath reads a whole (small) file.
func readPath(path string, max int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return readAll(fd, max)
}

// dirNames lists a directory's entries.
func dirNames(dir string) ([]string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 8<<10)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// readFile opens path without following links, requires a regular file
// of a sane size, and parses it.
func readFile(path string) (*Process, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxFile {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", path, maxFile)
	}
	b, err := readAll(fd, maxFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var p Process
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &p, nil
}

// ParseShimLine parses one line of the interposer's socket table:
// "fd=N kind=K transport=T reason=R local=A remote=A sdp_port=P" ("-"
// stands for none). ok is false for a line without a descriptor.
func ParseShimLine(line string) (s Socket, ok bool) {
	fdSeen := false
	for _, kv := range strings.Fields(line) {
		k, v, found := strings.Cut(kv, "=")
		if !found {
			continue
		}
		if v == "-" {
			v = ""
		}
		switch k {
		case "fd":
			n, err := strconv.Atoi(v)
			if err != nil {
				return Socket{}, false
			}
			s.FD, fdSeen = n, true
		case "kind":
			s.Kind = v
		case "transport":
			s.Transport = v
		case "reason":
			s.Reason = v
		case "local":
			s.Local = v
		case "remote":
			s.Remote = v
		case "sdp_port":
			s.SDPPort, _ = strconv.Atoi(v)
		}
	}
	if s.Transport == "" {
		s.Transport = "-"
	}
	return s, fdSeen
}

// ParseKeyValues parses "key=N key=N ..." into a map; values that are not
// numbers are left out.
func ParseKeyValues(line string) map[string]uint64 {
	m := map[string]uint64{}
	for _, kv := range strings.Fields(line) {
		k, v, found := strings.Cut(kv, "=")
		if !found {
			continue
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			m[k] = n
		}
	}
	return m
}

// TCPStateName names a kernel TCP state (tcp_states.h).
func TCPStateName(st uint8) string {
	names := [...]string{"", "established", "syn-sent", "syn-recv", "fin-wait1", "fin-wait2",
		"time-wait", "closed", "close-wait", "last-ack", "listen", "closing", "new-syn-recv"}
	if int(st) < len(names) && names[st] != "" {
		return names[st]
	}
	return "state-" + strconv.Itoa(int(st))
}
