package statsfile

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestParseStartTicks(t *testing.T) {
	// The command name may hold spaces and parentheses; fields count from the last ')'.
	line := "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 12345 678\n"
	n, err := parseStartTicks([]byte(line))
	require.NoError(t, err)
	assert.EqualValues(t, 987654, n)

	_, err = parseStartTicks([]byte("4242 (x) S 1 2 3"))
	assert.Error(t, err)
	_, err = parseStartTicks([]byte("garbage"))
	assert.Error(t, err)

	self, err := StartTicks(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, self)
}

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

func TestAlive(t *testing.T) {
	start, err := StartTicks(os.Getpid())
	require.NoError(t, err)
	assert.True(t, Alive(os.Getpid(), start), "this process")
	assert.False(t, Alive(os.Getpid(), start+1), "this pid with another start time: a reused pid")
	assert.False(t, Alive(deadPid(t), 0), "a process that has exited")
	assert.False(t, Alive(0, 0))
	assert.False(t, Alive(-1, 0))
}

func TestEnsureDir(t *testing.T) {
	uid := os.Getuid()
	base := t.TempDir()

	dir := filepath.Join(base, "d")
	require.NoError(t, EnsureDir(dir, uid))
	st, err := os.Lstat(dir)
	require.NoError(t, err)
	assert.True(t, st.IsDir())
	assert.EqualValues(t, 0o700, st.Mode().Perm())
	require.NoError(t, EnsureDir(dir, uid), "an existing private directory is fine")

	assert.Error(t, EnsureDir(dir, uid+1), "a directory owned by someone else is refused")

	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(dir, link))
	assert.Error(t, EnsureDir(link, uid), "a symbolic link is refused, even to a good directory")

	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o755))
	assert.Error(t, EnsureDir(open, uid), "a directory others can read is refused")

	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	assert.Error(t, EnsureDir(file, uid), "a file is refused")
}

func TestWriteAndLoad(t *testing.T) {
	uid, pid := os.Getuid(), os.Getpid()
	dir := filepath.Join(t.TempDir(), "d")
	require.NoError(t, EnsureDir(dir, uid))
	start, err := StartTicks(pid)
	require.NoError(t, err)

	now := time.Now()
	p := Process{Version: Version, PID: pid, Prog: "prog", StartTicks: start, UpdatedMs: now.Add(-time.Second).UnixMilli(),
		Sockets: []Socket{
			{FD: 3, Kind: "listen", Transport: "tcp+sdp", Local: "127.0.0.1:80", SDPPort: 20080, State: "listen"},
			{FD: 4, Kind: "sdp", Transport: "sdp", Local: "127.0.0.1:80", Remote: "127.0.0.1:5000", State: "established",
				SDP: &SDP{State: "up", FlowControl: "credit", Buffering: "separate", PayloadTx: 10, UserCopiesTx: 10}},
		}}
	data, err := json.Marshal(p)
	require.NoError(t, err)
	require.NoError(t, Write(dir, uid, pid, data))
	require.NoError(t, Write(dir, uid, pid, data), "replacing the file")

	st, err := os.Lstat(filepath.Join(dir, FileName(pid)))
	require.NoError(t, err)
	assert.EqualValues(t, 0o600, st.Mode().Perm())
	assert.True(t, st.Mode().IsRegular())

	// A temporary file left behind by an earlier writer with this pid does not stop a write.
	require.NoError(t, os.WriteFile(filepath.Join(dir, tmpName(pid)), []byte("x"), 0o600))
	require.NoError(t, Write(dir, uid, pid, data))
	_, err = os.Lstat(filepath.Join(dir, tmpName(pid)))
	assert.ErrorIs(t, err, os.ErrNotExist, "the temporary file is renamed away")

	// Files of a dead process, of a reused pid, and a dead writer's temporary file are stale.
	dead := deadPid(t)
	q := p
	q.PID = dead
	data2, _ := json.Marshal(q)
	require.NoError(t, Write(dir, uid, dead, data2))
	require.NoError(t, os.WriteFile(filepath.Join(dir, tmpName(dead)), []byte("{"), 0o600))
	parentStart, err := StartTicks(os.Getppid())
	require.NoError(t, err)
	reused := p
	reused.PID, reused.StartTicks = os.Getppid(), parentStart+1
	data3, _ := json.Marshal(reused)
	require.NoError(t, Write(dir, uid, os.Getppid(), data3))
	// A file whose name and content disagree is not trusted.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "1.json"), data, 0o600))

	es, errs := Load(dir, false, now)
	require.Empty(t, errs)
	require.Len(t, es, 1)
	assert.FileExists(t, filepath.Join(dir, FileName(dead)), "not removed without clean")

	es, errs = Load(dir, true, now)
	require.Empty(t, errs)
	require.Len(t, es, 1)
	e := es[0]
	assert.Equal(t, pid, e.PID)
	assert.Equal(t, "prog", e.Prog)
	assert.InDelta(t, time.Second, e.Age, float64(50*time.Millisecond))
	require.Len(t, e.Sockets, 2)
	assert.Equal(t, 20080, e.Sockets[0].SDPPort)
	require.NotNil(t, e.Sockets[1].SDP)
	assert.EqualValues(t, 10, e.Sockets[1].SDP.PayloadTx)
	for _, name := range []string{FileName(dead), tmpName(dead), FileName(os.Getppid()), "1.json"} {
		_, err := os.Lstat(filepath.Join(dir, name))
		assert.ErrorIsf(t, err, os.ErrNotExist, "%s is stale and removed", name)
	}

	Remove(dir, pid)
	es, errs = Load(dir, true, now)
	assert.Empty(t, errs)
	assert.Empty(t, es)
}

func TestLoadIgnoresLinksAndJunk(t *testing.T) {
	uid, pid := os.Getuid(), os.Getpid()
	dir := filepath.Join(t.TempDir(), "d")
	require.NoError(t, EnsureDir(dir, uid))
	start, err := StartTicks(pid)
	require.NoError(t, err)
	good, _ := json.Marshal(Process{Version: Version, PID: pid, StartTicks: start})
	target := filepath.Join(t.TempDir(), "elsewhere.json")
	require.NoError(t, os.WriteFile(target, good, 0o600))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, FileName(pid))))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600))

	es, errs := Load(dir, true, time.Now())
	assert.Empty(t, es, "a symbolic link is not followed")
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], unix.ELOOP)

	// Write replaces the link itself, never the file it points to.
	require.NoError(t, Write(dir, uid, pid, good))
	st, err := os.Lstat(filepath.Join(dir, FileName(pid)))
	require.NoError(t, err)
	assert.True(t, st.Mode().IsRegular())

	// Another format version is reported, not misread.
	other, _ := json.Marshal(Process{Version: Version + 1, PID: pid, StartTicks: start})
	require.NoError(t, Write(dir, uid, pid, other))
	es, errs = Load(dir, true, time.Now())
	assert.Empty(t, es)
	assert.Len(t, errs, 1)
}

func TestWriteRefusesForeignDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	require.NoError(t, EnsureDir(dir, os.Getuid()))
	assert.Error(t, Write(dir, os.Getuid()+1, os.Getpid(), []byte("{}")))
	link := dir + ".link"
	require.NoError(t, os.Symlink(dir, link))
	assert.Error(t, Write(link, os.Getuid(), os.Getpid(), []byte("{}")))
}

func TestParseShimLine(t *testing.T) {
	s, ok := ParseShimLine("fd=3 kind=listen transport=tcp+sdp reason=- local=127.0.0.1:8000 remote=- sdp_port=28000")
	require.True(t, ok)
	assert.Equal(t, Socket{FD: 3, Kind: "listen", Transport: "tcp+sdp", Local: "127.0.0.1:8000", SDPPort: 28000}, s)

	s, ok = ParseShimLine("fd=7 kind=tcp transport=tcp reason=plain-peer local=[::1]:80 remote=[::1]:4000 sdp_port=0")
	require.True(t, ok)
	assert.Equal(t, "plain-peer", s.Reason)
	assert.Equal(t, "[::1]:4000", s.Remote)
	assert.Zero(t, s.SDPPort)

	s, ok = ParseShimLine("fd=9 kind=socket transport=- reason=- local=- remote=- sdp_port=0")
	require.True(t, ok)
	assert.Equal(t, "-", s.Transport)

	_, ok = ParseShimLine("")
	assert.False(t, ok)
	_, ok = ParseShimLine("fd=x kind=tcp")
	assert.False(t, ok)
}

func TestParseKeyValues(t *testing.T) {
	m := ParseKeyValues("sdp_conns=2 fpdus_tx=10 prog=curl bad")
	assert.Equal(t, map[string]uint64{"sdp_conns": 2, "fpdus_tx": 10}, m)
}

func TestCopiesPerByte(t *testing.T) {
	s := SDP{PayloadTx: 100, UserCopiesTx: 100, PayloadRx: 0, UserCopiesRx: 0}
	s.SetCopiesPerByte()
	assert.InDelta(t, 1.0, s.CopiesPerByteTx, 1e-9)
	assert.Zero(t, s.CopiesPerByteRx)
}

func TestTCPStateName(t *testing.T) {
	assert.Equal(t, "established", TCPStateName(1))
	assert.Equal(t, "listen", TCPStateName(10))
	assert.Equal(t, "state-99", TCPStateName(99))
}

func TestDir(t *testing.T) {
	d := Dir(1234)
	assert.Equal(t, "libsdp-1234", filepath.Base(d))
	assert.True(t, filepath.IsAbs(d))
}

func TestLoadAfterExec(t *testing.T) {
	uid, pid := os.Getuid(), os.Getpid()
	dir := filepath.Join(t.TempDir(), "d")
	require.NoError(t, EnsureDir(dir, uid))
	start, err := StartTicks(pid)
	require.NoError(t, err)
	exe := Exe(pid)
	require.NotEmpty(t, exe)

	p := Process{Version: Version, PID: pid, StartTicks: start, Exe: exe}
	data, _ := json.Marshal(p)
	require.NoError(t, Write(dir, uid, pid, data))
	es, _ := Load(dir, true, time.Now())
	assert.Len(t, es, 1, "the same program")

	// The same pid and start time, another program: the process has exec'd since.
	p.Exe = "/nonexistent/program"
	data, _ = json.Marshal(p)
	require.NoError(t, Write(dir, uid, pid, data))
	es, _ = Load(dir, true, time.Now())
	assert.Empty(t, es)
	assert.NoFileExists(t, filepath.Join(dir, FileName(pid)))
}
