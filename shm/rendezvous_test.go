package shm

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openFds counts this process's descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// rendezvousPair connects a Dial to a fresh rendezvous.
func rendezvousPair(t *testing.T) (passive, active *Peer) {
	t.Helper()
	r, err := Listen()
	require.NoError(t, err)
	defer r.Close()
	active, err = Dial(r.Name)
	require.NoError(t, err)
	passive, err = r.Accept(5 * time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { passive.Close(); active.Close() })
	return passive, active
}

// TestRendezvous: the active side reaches the passive side's name, each
// learns the other's pid and uid from the kernel, and the region the
// active side made carries records both ways once the passive side has it.
func TestRendezvous(t *testing.T) {
	before := openFds(t)
	passive, active := rendezvousPair(t)
	assert.Equal(t, int32(os.Getpid()), passive.Cred.Pid)
	assert.Equal(t, uint32(os.Getuid()), passive.Cred.Uid)
	assert.Equal(t, int32(os.Getpid()), active.Cred.Pid)

	made, err := Create(8192)
	require.NoError(t, err)
	defer made.Close()
	require.NoError(t, active.SendRegion(made))
	require.NoError(t, made.CloseFd())
	got, err := passive.RecvRegion(8192, 5*time.Second)
	require.NoError(t, err)
	defer got.Close()
	assert.Equal(t, -1, got.Fd(), "the received descriptor is closed once mapped")

	ap, ac, err := made.Ends(true)
	require.NoError(t, err)
	pp, pc, err := got.Ends(false)
	require.NoError(t, err)
	require.NoError(t, ap.Append([]byte("to the passive side")))
	ap.Publish()
	require.NoError(t, pp.Append([]byte("to the active side")))
	pp.Publish()
	m, err := pc.Next(nil)
	require.NoError(t, err)
	assert.Equal(t, "to the passive side", string(m))
	m, err = ac.Next(nil)
	require.NoError(t, err)
	assert.Equal(t, "to the active side", string(m))

	passive.Close()
	active.Close()
	made.Close()
	got.Close()
	assert.Equal(t, before, openFds(t), "no descriptor left open")
}

// TestRendezvousBadOffers: what is not one sealed region of the agreed size
// is refused, and every descriptor that came with it is closed.
func TestRendezvousBadOffers(t *testing.T) {
	memfd := func(t *testing.T, seal bool) int {
		fd, err := unix.MemfdCreate("offer", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		require.NoError(t, err)
		require.NoError(t, unix.Ftruncate(fd, int64(2*RingBytes(4096))))
		if seal {
			_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
			require.NoError(t, err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	size := []byte{0, 16, 0, 0} // 4096, little endian
	cases := []struct {
		name string
		msg  func(t *testing.T) ([]byte, []int)
		want error
		size int // the ring size RecvRegion asks for (0: the one the offer names)
	}{
		{"no descriptor", func(t *testing.T) ([]byte, []int) { return size, nil }, ErrOffer, 4096},
		{"two descriptors", func(t *testing.T) ([]byte, []int) {
			return size, []int{memfd(t, true), memfd(t, true)}
		}, ErrOffer, 4096},
		{"short message", func(t *testing.T) ([]byte, []int) { return size[:3], []int{memfd(t, true)} }, ErrOffer, 4096},
		{"long message", func(t *testing.T) ([]byte, []int) { return []byte{0, 16, 0, 0, 0}, []int{memfd(t, true)} }, ErrOffer, 4096},
		{"another size", func(t *testing.T) ([]byte, []int) { return []byte{0, 32, 0, 0}, []int{memfd(t, true)} }, ErrOffer, 4096},
		{"size not its own", func(t *testing.T) ([]byte, []int) {
			return []byte{0, 32, 0, 0}, []int{memfd(t, true)}
		}, ErrSize, 0},
		{"unsealed", func(t *testing.T) ([]byte, []int) { return size, []int{memfd(t, false)} }, ErrUnsealed, 4096},
		{"not a memfd", func(t *testing.T) ([]byte, []int) {
			p := make([]int, 2)
			require.NoError(t, unix.Pipe2(p, unix.O_CLOEXEC))
			t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
			return size, p[:1]
		}, nil, 4096},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, fds := tc.msg(t)
			before := openFds(t)
			passive, active := rendezvousPair(t)
			var oob []byte
			if len(fds) > 0 {
				oob = unix.UnixRights(fds...)
			}
			require.NoError(t, unix.Sendmsg(active.fd, msg, oob, nil, 0))
			r, err := passive.RecvRegion(tc.size, 5*time.Second)
			require.Error(t, err)
			assert.Nil(t, r)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			passive.Close()
			active.Close()
			assert.Equal(t, before, openFds(t), "the offered descriptors are closed")
		})
	}
}

// TestRendezvousTimeout: a peer that never comes, or never sends, ends the
// wait at its bound.
func TestRendezvousTimeout(t *testing.T) {
	r, err := Listen()
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Accept(50 * time.Millisecond)
	assert.ErrorIs(t, err, ErrTimeout)
	passive, _ := rendezvousPair(t)
	_, err = passive.RecvRegion(4096, 50*time.Millisecond)
	assert.ErrorIs(t, err, ErrTimeout)

	var gone Name
	copy(gone[:], "no such name....")
	_, err = Dial(gone)
	assert.ErrorIs(t, err, unix.ECONNREFUSED)
	r2, err := Listen()
	require.NoError(t, err)
	name := r2.Name
	require.NoError(t, r2.Close())
	_, err = Dial(name)
	assert.ErrorIs(t, err, unix.ECONNREFUSED, "a closed rendezvous cannot be reached")
}

// TestRendezvousRefuse: Refuse decides with the peer. Nobody came: it says
// so, and a Dial afterwards is refused. A peer came first: it says so, and
// Accept still returns that peer, whose region arrives; a second Dial is
// refused. Nothing is left open.
func TestRendezvousRefuse(t *testing.T) {
	before := openFds(t)
	r, err := Listen()
	require.NoError(t, err)
	came, err := r.Refuse()
	require.NoError(t, err)
	assert.False(t, came, "nobody came")
	_, err = Dial(r.Name)
	assert.ErrorIs(t, err, unix.ECONNREFUSED, "refused after Refuse")
	require.NoError(t, r.Close())

	r, err = Listen()
	require.NoError(t, err)
	active, err := Dial(r.Name)
	require.NoError(t, err)
	made, err := Create(8192)
	require.NoError(t, err)
	require.NoError(t, active.SendRegion(made))
	came, err = r.Refuse()
	require.NoError(t, err)
	assert.True(t, came, "the peer came before")
	came, err = r.Refuse()
	require.NoError(t, err)
	assert.True(t, came, "and still did, asked again")
	_, err = Dial(r.Name)
	assert.ErrorIs(t, err, unix.ECONNREFUSED, "a second peer is refused")
	passive, err := r.Accept(0)
	require.NoError(t, err)
	got, err := passive.RecvRegion(8192, time.Second)
	require.NoError(t, err)
	require.NoError(t, got.Close())
	require.NoError(t, passive.Close())
	require.NoError(t, active.Close())
	require.NoError(t, made.Close())
	require.NoError(t, r.Close())

	// A peer that came and was never accepted is closed with the rendezvous.
	r, err = Listen()
	require.NoError(t, err)
	active, err = Dial(r.Name)
	require.NoError(t, err)
	came, err = r.Refuse()
	require.NoError(t, err)
	assert.True(t, came)
	require.NoError(t, r.Close())
	require.NoError(t, active.Close())
	assert.Equal(t, before, openFds(t), "descriptors left open")
}

// TestRendezvousOtherNamespace: a process in another network namespace
// cannot reach the name (no shared memory between namespaces: they keep
// iWARP/TCP), while the same process in this namespace can.
func TestRendezvousOtherNamespace(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare (util-linux) is needed: %v", err)
	}
	r, err := Listen()
	require.NoError(t, err)
	defer r.Close()
	dial := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		args = append(args, os.Args[0], "-test.run=^TestRendezvousDialHelper$", "-test.count=1")
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "SHM_DIAL_NAME="+hex.EncodeToString(r.Name[:]))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := dial("env")
	require.NoErrorf(t, err, "%s", out)
	assert.Contains(t, out, "dial: connected")
	p, err := r.Accept(5 * time.Second)
	require.NoError(t, err)
	p.Close()

	out, err = dial("unshare", "-n")
	require.NoErrorf(t, err, "%s", out)
	assert.Contains(t, out, "dial: connection refused")
	_, err = r.Accept(50 * time.Millisecond)
	assert.ErrorIs(t, err, ErrTimeout, "nobody reached the rendezvous from the other namespace")
}

// TestRendezvousDialHelper is TestRendezvousOtherNamespace's dialling
// process; it does nothing unless that test runs it.
func TestRendezvousDialHelper(t *testing.T) {
	h := os.Getenv("SHM_DIAL_NAME")
	if h == "" {
		return
	}
	var name Name
	b, err := hex.DecodeString(h)
	require.NoError(t, err)
	copy(name[:], b)
	p, err := Dial(name)
	switch {
	case err == nil:
		fmt.Println("dial: connected")
		p.Close()
	case errors.Is(err, unix.ECONNREFUSED):
		fmt.Println("dial: connection refused")
	default:
		t.Fatalf("dial: %v", err)
	}
}

// TestRandomNames: every rendezvous name is 16 fresh random octets (getrandom(2) called
// directly): 64 names, none zero, no two alike, and no octet position constant across them.
func TestRandomNames(t *testing.T) {
	seen := map[Name]bool{}
	var first Name
	varies := [len(first)]bool{}
	for i := range 64 {
		var n Name
		require.NoError(t, randomName(&n))
		assert.NotEqual(t, Name{}, n, "name %d", i)
		assert.False(t, seen[n], "name %d repeats %s", i, hex.EncodeToString(n[:]))
		seen[n] = true
		if i == 0 {
			first = n
		}
		for j := range n {
			varies[j] = varies[j] || n[j] != first[j]
		}
	}
	for j, v := range varies {
		assert.True(t, v, "octet %d is the same in all 64 names", j)
	}
}
