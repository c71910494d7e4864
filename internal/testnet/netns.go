package testnet

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Netns is two network namespaces joined by a veth link, which a test makes
// and which go when it ends: two hosts to libsdp, A at AddrA and B at AddrB.
type Netns struct {
	A, B         string // the namespaces
	VethA, VethB string // the link's ends, in A and B
	AddrA, AddrB string
}

// NewNetns makes the pair named after tag and the test process (tag-a-PID,
// tag-b-PID), addresses prefix.1 and prefix.2 (a /24), every link up. It
// needs root.
func NewNetns(t testing.TB, tag, prefix string) *Netns {
	t.Helper()
	require.Equal(t, 0, os.Geteuid(), "network namespaces need root")
	id := strconv.Itoa(os.Getpid() % 100000)
	short := tag[:min(len(tag), 3)]
	n := &Netns{A: tag + "-a-" + id, B: tag + "-b-" + id, VethA: short + id + "a", VethB: short + id + "b",
		AddrA: prefix + ".1", AddrB: prefix + ".2"}
	ip := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
	}
	for _, ns := range []string{n.A, n.B} {
		ip("netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	ip("link", "add", n.VethA, "netns", n.A, "type", "veth", "peer", "name", n.VethB, "netns", n.B)
	ip("-n", n.A, "addr", "add", n.AddrA+"/24", "dev", n.VethA)
	ip("-n", n.B, "addr", "add", n.AddrB+"/24", "dev", n.VethB)
	for _, l := range [][2]string{{n.A, "lo"}, {n.B, "lo"}, {n.A, n.VethA}, {n.B, n.VethB}} {
		ip("-n", l[0], "link", "set", l[1], "up")
	}
	return n
}
