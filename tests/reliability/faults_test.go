package reliability

import (
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"libsdp/internal/testnet"
)

var progressRe = regexp.MustCompile(`^PROGRESS `)

// startTransfer starts a preloaded sink and a preloaded sender of bytes at kibps (0: as fast as
// it goes), and waits until the sink has received its first 4 MiB.
func startTransfer(t *testing.T, dir string, bytes, kibps int, extra ...string) (srv, cli *prog, port int) {
	t.Helper()
	srv = start(t, "sink", sdpEnv(dir, "server", extra...), relprog, "sink", freePort(t))
	port = srv.port(t)
	waitListening(t, sdpPort(port, 20000), 10*time.Second)
	cli = start(t, "send", sdpEnv(dir, "client", extra...), relprog, "send", "127.0.0.1", strconv.Itoa(port),
		strconv.Itoa(bytes), "1", "5", strconv.Itoa(kibps))
	srv.waitLine(t, progressRe, 30*time.Second)
	return srv, cli, port
}

// TestPeerKilled kills one end of a transfer with SIGKILL: the other end must see the end of the
// stream or ECONNRESET (as with TCP) within 10 s, without hanging; over shared memory (the
// default on one host) and over iWARP/TCP.
func TestPeerKilled(t *testing.T) {
	for _, tr := range []struct{ name, env string }{{"shm", "SDP_SHM=1"}, {"iwarp", overWire}} {
		// carried checks, from the survivor's statistics, that the transfer had the transport.
		carried := func(t *testing.T, dir, name string) {
			shm := statsOf(t, dir, name)["shm_conns"]
			if tr.name == "shm" {
				assert.Equal(t, int64(1), shm, "the transfer went through shared memory")
			} else {
				assert.Zero(t, shm, "the transfer went over TCP")
			}
		}
		t.Run(tr.name+"/sender", func(t *testing.T) {
			dir := logDir(t)
			srv, cli, _ := startTransfer(t, dir, 1<<30, 16<<10, tr.env)
			require.NoError(t, syscall.Kill(cli.pid(), syscall.SIGKILL))
			d := srv.waitLines(doneRe, 1, 10*time.Second)
			require.Len(t, d, 1, "the receiver saw the sender's death within 10 s")
			assert.Regexp(t, `^DONE (short|err=ECONNRESET) `, d[0], "end of stream or reset, as with TCP")
			assert.False(t, srv.exited())
			srv.stopGently(10 * time.Second)
			carried(t, dir, "server")
		})
		t.Run(tr.name+"/receiver", func(t *testing.T) {
			dir := logDir(t)
			srv, cli, _ := startTransfer(t, dir, 1<<30, 16<<10, tr.env)
			require.NoError(t, syscall.Kill(srv.pid(), syscall.SIGKILL))
			s := cli.waitLines(sentRe, 1, 10*time.Second)
			require.Len(t, s, 1, "the sender saw the receiver's death within 10 s")
			assert.Regexp(t, `^SENT 0 err=(ECONNRESET|EPIPE) `, s[0], "a reset or a broken pipe, as with TCP")
			require.True(t, cli.wait(10*time.Second), "the sender exits after its error")
			carried(t, dir, "client")
		})
	}
}

// TestResetMidTransfer resets both TCP connections under an SDP transfer (a relay closes them
// with SO_LINGER 0): both programs get ECONNRESET (the sender may get EPIPE), as with TCP.
func TestResetMidTransfer(t *testing.T) {
	const conns = 5
	dir := logDir(t)
	srv := start(t, "sink", sdpEnv(dir, "server", overWire), relprog, "sink", freePort(t))
	p := srv.port(t)
	waitListening(t, sdpPort(p, 20000), 10*time.Second)
	rl := newRelay(t, fmt.Sprintf("127.0.0.1:%d", sdpPort(p, 20000)), damageReset, 256<<10, 2<<20, 99)
	off := ((rl.port()-p)%64512 + 64512) % 64512
	cli := start(t, "send", sdpEnv(dir, "client", overWire, "SDP_PORT_OFFSET="+strconv.Itoa(off)), relprog,
		"send", "127.0.0.1", strconv.Itoa(p), strconv.Itoa(4<<20), strconv.Itoa(conns), "9")
	require.True(t, cli.wait(time.Minute), "the sender finished")
	dones := srv.waitLines(doneRe, conns, 10*time.Second)
	require.Len(t, dones, conns)
	for i, in := range rl.injections() {
		require.True(t, in.done, "connection %d was reset", i)
		assert.Regexp(t, `^DONE err=ECONNRESET `, dones[i], "receiver, connection %d", i)
	}
	for _, s := range cli.matching(sentRe) {
		assert.Regexp(t, `^SENT \d+ err=(ECONNRESET|EPIPE) `, s, "sender")
	}
}

// freePortPair returns a port P such that P and P+20000 are free on 127.0.0.1.
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 200 {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		p := l.Addr().(*net.TCPAddr).Port
		if p+20000 > 65535 {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p+20000))
		l.Close()
		if err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatal("no free pair of ports")
	return 0
}

// TestServerRestart kills the receiving server (SIGKILL) in the middle of a series of
// connections and starts it again on the same port while the client keeps retrying refused
// connects: every connection but those cut by the kill completes intact.
func TestServerRestart(t *testing.T) {
	const conns = 30
	dir := logDir(t)
	p := freePortPair(t)
	srv := start(t, "sink1", sdpEnv(dir, "server"), relprog, "sink", strconv.Itoa(p))
	srv.port(t)
	waitListening(t, p+20000, 10*time.Second)
	cli := start(t, "retry", sdpEnv(dir, "client"), relprog, "retry", "127.0.0.1", strconv.Itoa(p),
		strconv.Itoa(2<<20), strconv.Itoa(conns), "31", "65536")
	srv.waitLines(regexp.MustCompile(`^DONE ok`), 5, 30*time.Second)
	srv.kill()
	time.Sleep(time.Second) // the server is down for a second: the scenario, not a synchronisation
	srv2 := start(t, "sink2", sdpEnv(dir, "server"), relprog, "sink", strconv.Itoa(p))
	srv2.port(t)
	require.True(t, cli.wait(2*time.Minute), "the client finished")
	sent := cli.matching(sentRe)
	require.Len(t, sent, conns)
	failed := 0
	for _, s := range sent {
		if !strings.Contains(s, " ok ") {
			failed++
		}
	}
	// The connection cut by the kill fails, and at most one more: the kernel closes a killed
	// process's descriptors in order, the SDP listener (kept on a high descriptor) after the
	// connection, so a retry can land in the dying listener's queue and be reset with it.
	assert.LessOrEqual(t, failed, 2, "only the connections cut by the kill fail:\n%s", strings.Join(sent, "\n"))
	assert.Empty(t, srv2.matching(regexp.MustCompile(`corrupt|short`)))
	srv2.stopGently(10 * time.Second)
	st := statsOf(t, dir, "client")
	t.Logf("server restart: %d of %d connections failed; client sdp_conns=%d tcp_conns=%d", failed, conns, st["sdp_conns"], st["tcp_conns"])
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
}

// newNetns makes the namespace pair the faults run between: the server side is 10.213.7.1,
// the client side 10.213.7.2.
func newNetns(t *testing.T) *testnet.Netns {
	t.Helper()
	return testnet.NewNetns(t, "sdprel", "10.213.7")
}

// transferInNetns runs a preloaded sink in namespace a and a preloaded sender in b.
func transferInNetns(t *testing.T, n *testnet.Netns, dir string, bytes, conns, kibps int, clientEnv ...string) (srv, cli *prog) {
	t.Helper()
	srv = startIn(t, "sink", sdpEnv(dir, "server"), []string{"ip", "netns", "exec", n.A}, relprog, "sink", "0", "10.213.7.1")
	p := srv.port(t)
	srv.waitLine(t, regexp.MustCompile(`^PORTS`), 10*time.Second)
	// The sink's namespace is another host to the sender, which the test vouches for.
	cli = startIn(t, "send", sdpEnv(dir, "client", append([]string{"SDP_TRUST_REMOTE=10.213.7.1"}, clientEnv...)...), []string{"ip", "netns", "exec", n.B}, relprog, "send", "10.213.7.1",
		strconv.Itoa(p), strconv.Itoa(bytes), strconv.Itoa(conns), "17", strconv.Itoa(kibps))
	return srv, cli
}

// checkIntact asserts that every connection of a transfer completed over SDP with every octet.
func checkIntact(t *testing.T, dir string, srv, cli *prog, conns int) {
	t.Helper()
	require.True(t, cli.wait(3*time.Minute), "the sender finished")
	sent := cli.matching(sentRe)
	require.Len(t, sent, conns)
	for _, s := range sent {
		assert.Contains(t, s, " ok ", "sender")
	}
	dones := srv.waitLines(doneRe, conns, 10*time.Second)
	require.Len(t, dones, conns)
	for _, d := range dones {
		assert.Regexp(t, `^DONE ok `, d, "receiver")
	}
	srv.stopGently(10 * time.Second)
	assert.Equal(t, int64(conns), statsOf(t, dir, "client")["sdp_conns"], "every connection over SDP")
}

// TestLinkDown takes the veth link between two namespaces down for 5 s in the middle of an SDP
// transfer and brings it up again: the transfer completes intact.
func TestLinkDown(t *testing.T) {
	n := newNetns(t)
	dir := logDir(t)
	srv, cli := transferInNetns(t, n, dir, 32<<20, 1, 4<<10)
	srv.waitLine(t, progressRe, 30*time.Second)
	run(t, "ip", "-n", n.A, "link", "set", n.VethA, "down")
	time.Sleep(5 * time.Second) // the outage being tested, not a synchronisation
	run(t, "ip", "-n", n.A, "link", "set", n.VethA, "up")
	checkIntact(t, dir, srv, cli, 1)
}

// TestPacketLoss drops 5% of the packets entering each namespace (nftables numgen random)
// during SDP transfers: every octet arrives intact.
func TestPacketLoss(t *testing.T) {
	_, err := exec.LookPath("nft")
	require.NoError(t, err, "nft is missing: run make deps")
	n := newNetns(t)
	for _, ns := range []string{n.A, n.B} {
		run(t, "ip", "netns", "exec", ns, "nft", "add table inet sdploss")
		run(t, "ip", "netns", "exec", ns, "nft", "add chain inet sdploss in { type filter hook input priority 0 ; }")
		run(t, "ip", "netns", "exec", ns, "nft", "add rule inet sdploss in meta l4proto tcp numgen random mod 100 < 5 counter drop")
	}
	dir := logDir(t)
	// The drops hit SYNs and MPA Requests too: TCP retransmits a lost SYN after 1 s, then 2 s,
	// so the handshake alone may outlast SDP_CONNECT_TIMEOUT's 2 s, and the sender would fall
	// back to TCP (by design, for a host vouched for but not seen by the kernel) and leave the
	// sink an empty connection. What is tested is the SDP transfer under loss: the sender waits
	// for the Request as long as TCP's own retransmissions may take.
	srv, cli := transferInNetns(t, n, dir, 8<<20, 2, 0, "SDP_CONNECT_TIMEOUT=30000")
	checkIntact(t, dir, srv, cli, 2)
	out, err := exec.Command("ip", "netns", "exec", n.A, "nft", "list", "chain", "inet", "sdploss", "in").CombinedOutput()
	require.NoError(t, err)
	m := regexp.MustCompile(`packets (\d+)`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	dropped, _ := strconv.Atoi(string(m[1]))
	assert.Positive(t, dropped, "packets were dropped")
	t.Logf("packet loss: %d packets dropped entering the server's namespace", dropped)
}

// TestLateMPARequest delays the server's MPA Request beyond SDP_CONNECT_TIMEOUT (2 s) while the
// client has already queued data. The SDP port is the server's own (the relay in between
// carries its mark and user), so the client, which the kernel told so, waits for the Request
// as TCP waits for a late server (docs/PROTOCOL.md §2): both streams arrive whole over SDP.
func TestLateMPARequest(t *testing.T) {
	dir := logDir(t)
	srv := start(t, "sink", sdpEnv(dir, "server", overWire), relprog, "sink", freePort(t))
	p := srv.port(t)
	waitListening(t, sdpPort(p, 20000), 10*time.Second)
	rl := newRelay(t, fmt.Sprintf("127.0.0.1:%d", sdpPort(p, 20000)), delayRequest, 1, 2, 5)
	off := ((rl.port()-p)%64512 + 64512) % 64512
	cli := start(t, "send", sdpEnv(dir, "client", overWire, "SDP_PORT_OFFSET="+strconv.Itoa(off)), relprog,
		"send", "127.0.0.1", strconv.Itoa(p), strconv.Itoa(1<<20), "2", "21")
	require.True(t, cli.wait(time.Minute), "the sender finished")
	for _, s := range cli.matching(sentRe) {
		assert.Contains(t, s, " ok ", "sender")
	}
	oks := srv.waitLines(regexp.MustCompile(`^DONE ok `), 2, 10*time.Second)
	assert.Len(t, oks, 2, "both streams arrived whole")
	assert.Empty(t, srv.matching(regexp.MustCompile(`^DONE (corrupt|err|short)`)))
	log := logText(t, dir, "client")
	assert.NotContains(t, log, "transport=tcp", "the client waited for the late Request")
	assert.Equal(t, int64(2), statsOf(t, dir, "client")["sdp_conns"], "both connections over SDP")
}

// lateServerPy accepts one connection 3 s after it listens, echoes 5 bytes in upper case, then
// says whether a second connection was queued (there must be none: the client's abandoned SDP
// attempt is dropped by its MPA Reject).
const lateServerPy = `
import socket, sys, time
s = socket.socket()
s.bind((sys.argv[1], 0))
s.listen(8)
print("PORTS", s.getsockname()[1], flush=True)
time.sleep(3)
a, _ = s.accept()
a.settimeout(20)
a.sendall(a.recv(5).upper())
a.close()
s.settimeout(1)
try:
    s.accept()
    print("PHANTOM", flush=True)
except socket.timeout:
    print("NO PHANTOM", flush=True)
`

// TestLateAcceptOtherHost: a server on another host (namespace), vouched for by
// SDP_TRUST_REMOTE, accepts 3 s late. The client cannot know that S(P) is the server's own, so
// after SDP_CONNECT_TIMEOUT it goes to P over TCP, its 5 early bytes first, and tells S(P) with
// an MPA Reject: the server's application sees exactly one connection, which works.
func TestLateAcceptOtherHost(t *testing.T) {
	n := newNetns(t)
	dir := logDir(t)
	srv := startIn(t, "late", sdpEnv(dir, "server"), []string{"ip", "netns", "exec", n.A}, "/usr/bin/python3", "-c", lateServerPy, "10.213.7.1")
	p := srv.port(t)
	cli := startIn(t, "client", sdpEnv(dir, "client", "SDP_TRUST_REMOTE=10.213.7.0/24"), []string{"ip", "netns", "exec", n.B},
		"/usr/bin/python3", "-c", `
import socket, sys
c = socket.create_connection(("10.213.7.1", int(sys.argv[1])))
c.settimeout(30)
c.sendall(b"hello")
print("GOT", c.recv(10).decode(), flush=True)
`, strconv.Itoa(p))
	cli.waitLine(t, regexp.MustCompile(`^GOT HELLO$`), 30*time.Second)
	srv.waitLine(t, regexp.MustCompile(`^NO PHANTOM$`), 30*time.Second)
	assert.Contains(t, logText(t, dir, "client"), "transport=tcp reason=timeout")
}
