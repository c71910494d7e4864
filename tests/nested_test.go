package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNestedEpoll runs tests/c/nested.c (both ends in one process) preloaded
// and plain: an epoll set with an SDP member, polled and nested.
func TestNestedEpoll(t *testing.T) { runSelfContained(t, "nested", "nest ok") }

// TestCloseEverything runs tests/c/closeall.c: a program that closes every
// descriptor it does not know after its first SDP I/O keeps working.
func TestCloseEverything(t *testing.T) { runSelfContained(t, "closeall", "closeall ok") }

// TestEpollFollowsOpenFile runs tests/c/follow.c: an epoll registration
// survives the close of the descriptor that made it while a duplicate lives.
func TestEpollFollowsOpenFile(t *testing.T) { runSelfContained(t, "follow", "follow ok") }

// TestEpollDeleteAndAddAgain runs tests/c/epollreadd.c: a connection deleted
// from an epoll set and added again, a thousand times, reports as over the
// kernel's epoll: nothing reported while out of the set, ENOENT for MOD and
// a second DEL, what waits reported at the ADD (a guard for any change to
// how the interposer removes and adds its kernel registrations).
func TestEpollDeleteAndAddAgain(t *testing.T) { runSelfContained(t, "epollreadd", "readd ok") }

// TestEngineThreadsTimerSlack runs tests/c/slack.c: the Go runtime's first
// threads run with the engine's timer slack (1 ms, so that the runtime's
// monitor does not take the CPU from the application every 20 us) and the
// application's thread keeps its own.
func TestEngineThreadsTimerSlack(t *testing.T) { runSelfContained(t, "slack", "slack ok") }

// TestEngineMainThreadStack: the engine's first call from the main thread
// costs no read of /proc/self/maps (glibc's way to find that thread's
// stack, 24 reads of 1 KiB in curl), and the application's own
// pthread_getattr_np still gets glibc's answer (tests/c/stackbound.c under
// strace, preloaded; plain, glibc's answer alone).
func TestEngineMainThreadStack(t *testing.T) {
	runSelfContained(t, "stackbound", "stackbound ok")
	log, _ := runStraced(t, "stackbound", "stackbound ok", "-qq", "-e", "trace=openat,write")
	before, after, found := strings.Cut(log, "stackbound: the application asks")
	require.True(t, found, "the program's mark in the trace:\n%s", log)
	require.NotContains(t, before, `"/proc/self/maps"`, "the engine's load and first calls read /proc/self/maps")
	// glibc's open for the application's call, and the program's own
	require.GreaterOrEqual(t, strings.Count(after, `"/proc/self/maps"`), 2, "the application's own call goes to glibc:\n%s", after)
}

// TestEpollRoundsSystemCalls: an event loop's request and answer over
// shared memory (tests/c/epollrounds.c, both ends in one epoll set, 2000
// rounds) costs the engine about a doorbell and its drain per message: no
// read of a socket the kernel has reported nothing on (the set's look
// before its wait, the second read of a short one) and no eventfd for what
// the set's own look found. The build before made 6 recvfrom and 2 writes
// a round, where 2 and 0 are needed.
func TestEpollRoundsSystemCalls(t *testing.T) {
	runSelfContained(t, "epollrounds", "rounds ok")
	text, stats := runStraced(t, "epollrounds", "rounds ok", "-c")
	require.Regexp(t, regexp.MustCompile(`shm_conns=[1-9]`), stats, "the rounds went over shared memory")
	calls := func(name string) int { return stracedCalls(t, text, name) }
	const rounds = 2000
	recvs, writes := calls("recvfrom"), calls("write")
	t.Logf("per round: %.2f recvfrom, %.2f write (strace -c):\n%s", float64(recvs)/rounds, float64(writes)/rounds, text)
	require.LessOrEqual(t, recvs, 3*rounds, "doorbell socket reads")
	require.LessOrEqual(t, writes, rounds/2, "eventfd writes")
}

// stracedCalls returns how many calls of name a summary of strace -c counts.
func stracedCalls(t *testing.T, summary, name string) int {
	m := regexp.MustCompile(`(?m)^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?` + name + `$`).FindStringSubmatch(summary)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// TestOneShotsSends: connections of one request and one answer each over
// iWARP (tests/c/oneshots.c, both ends in one process, under strace). A
// connection's messages need four sends: the connecting side's MPA Reply
// with its request, the answer, and each side's DisConn. The build before
// made six: the Reply alone, and an empty message from the accepting side
// as soon as it had the Reply. With both ends in an epoll set, a close
// rings no eventfd: the set's registrations go with the descriptor (the
// build before rang four a connection, two at each end's close).
func TestOneShotsSends(t *testing.T) {
	const conns = 200
	for _, epoll := range []bool{false, true} {
		t.Run(map[bool]string{false: "blocking", true: "epoll"}[epoll], func(t *testing.T) {
			env := []string{"SDP_SHM=0", "SDP_SHORT_TCP=0"}
			if epoll {
				env = append(env, "ONESHOTS_EPOLL=1")
			}
			text, stats := runStracedEnv(t, "oneshots", "oneshots ok", env, "-e", "trace=sendmsg,sendmmsg,sendto,write")
			// Every connection over SDP (SDP_SHORT_TCP=0: these short ones would
			// otherwise go over plain TCP after the first few, whose sends are
			// the application's and not counted, and the bound below held
			// whatever the engine sent).
			m := regexp.MustCompile(`sdp_conns=(\d+) `).FindStringSubmatch(stats)
			require.NotNil(t, m, "sdp_conns in the statistics line:\n%s", stats)
			sdp, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			require.GreaterOrEqual(t, sdp, conns, "the connections ran over SDP")
			count := func(re string) int { return len(regexp.MustCompile(re).FindAllStringIndex(text, -1)) }
			// The engine writes a stream with sendto (iwarp.sendDontWait), its
			// records with sendmmsg. Not counted: the shim's netlink queries
			// and the accepting side's MPA Request, which the shim sends.
			sends := count(`(?m)^\d+\s+(sendm?msg\(|sendto\(\d+, ")`) - count(`(?m)^\d+\s+sendto\(\d+, "MPA ID Req Frame`)
			// An eventfd's ring: 8 octets, the counter 1 (the log's writes are text).
			writes := count(`(?m)^\d+\s+write\(\d+, "\\1\\0\\0\\0\\0\\0\\0\\0", 8`)
			t.Logf("per connection: %.2f sendto, sendmsg and sendmmsg, %.2f eventfd writes (strace)",
				float64(sends)/conns, float64(writes)/conns)
			require.LessOrEqual(t, sends, 4*conns, "sends of the engine's")
			require.LessOrEqual(t, writes, conns/10, "eventfd writes")
		})
	}
}

// compileOne compiles tests/c/<name>.c into dir and returns the program's path.
func compileOne(ctx context.Context, t *testing.T, dir, name string) string {
	bin := filepath.Join(dir, name)
	out, err := exec.CommandContext(ctx, "gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-g",
		"-I", "c", "-o", bin, filepath.Join("c", name+".c")).CombinedOutput()
	require.NoError(t, err, "gcc: %s", out)
	return bin
}

// runStraced compiles tests/c/<name>.c and runs it preloaded under strace -f
// with args (-c: a summary), checking that it prints okLine: it returns
// strace's output and the engine's log.
func runStraced(t *testing.T, name, okLine string, args ...string) (trace, engineLog string) {
	return runStracedEnv(t, name, okLine, nil, args...)
}

// runStracedEnv is runStraced with env added to the program's environment.
func runStracedEnv(t *testing.T, name, okLine string, env []string, args ...string) (trace, engineLog string) {
	_, err := exec.LookPath("strace")
	require.NoError(t, err, "strace (scripts/install-deps.sh installs it)")
	shim, ctx := setup(t)
	dir := t.TempDir()
	bin := compileOne(ctx, t, dir, name)
	file := filepath.Join(dir, "strace.txt")
	cmd := exec.CommandContext(ctx, "strace", append(append([]string{"-f", "-o", file}, args...), bin)...)
	cmd.Env = append(sdpEnv(shim, filepath.Join(dir, "traced.%p.log")), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), okLine)
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	return string(text), logText(t, dir, "traced")
}

// TestEpollManyConnections: an epoll set of 64 SDP connections of which a few
// move, 2000 rounds of an arrival and a partial read: every wait reports
// exactly the connection that moved, and the interposer asks the engine about
// the connections that may have changed, not about all 64 at every wait
// (384,704 questions when it did). Those are the ones that moved, and over
// shared memory the busy ones, 5 here (active within the set's last 16
// returns: the set took back their sleep announcements, so their next bytes
// ring nothing; shim/epoll.c, epoll_withdraw): about 5 a wait.
func TestEpollManyConnections(t *testing.T) {
	runSelfContained(t, "epollmany", "many ok", func(t *testing.T, stats string) {
		m := regexp.MustCompile(`engine_polls=(\d+) `).FindStringSubmatch(stats)
		require.NotNil(t, m, "engine_polls in the statistics line:\n%s", stats)
		polls, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		const waits = 3 * 2000
		t.Logf("%d questions to the engine for %d waits on a set of 64 connections", polls, waits)
		require.Less(t, polls, 8*waits, "questions to the engine")
	})
}

// TestEpollAwakeSetRingsNothing: an epoll set of two connections over shared
// memory whose peers send while the set's thread is awake, between its waits
// (an event loop's connections answering while it handles the others), 2,000
// rounds level-triggered and edge-triggered: every wait reports the
// connection that received, and those sends ring no doorbell, as the set took
// back its sleep announcements when its wait returned. What rings is the
// receivers' credits going back to the two senders, which never read (512,
// against 4,512 before: one more a send).
func TestEpollAwakeSetRingsNothing(t *testing.T) {
	runSelfContained(t, "epollawake", "awake ok", func(t *testing.T, stats string) {
		require.Regexp(t, regexp.MustCompile(`shm_conns=[1-9][0-9]* `), stats, "the connections ran over shared memory")
		m := regexp.MustCompile(`shm_bells_rung=(\d+) `).FindStringSubmatch(stats)
		require.NotNil(t, m, "shm_bells_rung in the statistics line:\n%s", stats)
		bells, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		const sends = 2 * 2 * 1000
		t.Logf("%d doorbells rung for %d sends to an awake epoll set", bells, sends)
		require.Less(t, bells, sends/4, "doorbells rung")
	})
}

// TestEpollSecondWaiterWoken: two threads in epoll_wait on one set, 50 rounds.
// While the second sleeps in the set's wait, the first one's wait returns (a
// one-shot registration re-armed with bytes already in the engine, so the
// kernel wakes nobody; over plain TCP the re-arm may wake the second thread
// for them instead, which the program accepts); the next bytes for the second
// must still wake it: a set with another thread inside its wait keeps its
// connections' sleep announcements (over shared memory, taken back, their
// peers would ring nothing and the second thread would sleep out its 5 s).
func TestEpollSecondWaiterWoken(t *testing.T) {
	runSelfContained(t, "epollwaiters", "waiters ok")
}

// runSelfContained compiles tests/c/<name>.c, a program that plays both ends,
// and runs it preloaded (both its connections must be SDP) and plain.
func runSelfContained(t *testing.T, name, okLine string, checks ...func(t *testing.T, stats string)) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	bin := compileOne(ctx, t, dir, name)
	for _, preload := range []bool{true, false} {
		name := map[bool]string{true: "preloaded", false: "plain"}[preload]
		t.Run(name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, bin)
			if preload {
				cmd.Env = sdpEnv(shim, filepath.Join(dir, name+".%p.log"))
			} else {
				cmd.Env = cleanEnv()
			}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), okLine)
			if preload {
				stats := logText(t, dir, name)
				require.Regexp(t, regexp.MustCompile(`sdp_conns=[1-9][0-9]* `), stats, "the connections ran over SDP")
				require.Regexp(t, regexp.MustCompile(`tcp_conns=0 `), stats, "no connection fell back to TCP")
				for _, check := range checks {
					check(t, stats)
				}
			}
		})
	}
}

// TestEpollSetPolls: an epoll set's wait over shared memory polls before it
// sleeps (shim/epoll.c, epoll_spin): 2,000 pings from the waiting thread,
// each answered by another thread on the connection or through a pipe in the
// same set, level-triggered and edge-triggered; every wait reports exactly
// what the answer moved, and a wait with nothing coming lasts its timeout.
// By default the set polls (shm_set_polls; how many of the polls find the
// answer depends on the machine's load, logged); with SDP_POLL_US=0 it never
// does, and the program behaves the same.
func TestEpollSetPolls(t *testing.T) {
	testWaitPolls(t, "epollspin", "shm_set_polls", "shm_set_poll_hits")
}

// TestPollSelectPolls: a poll or select wait on one connection over shared
// memory polls its ring before it sleeps (shim/poll.c, SDP_POLL_SPIN): a
// process pings another 2,000 times and waits for each answer, which comes
// on the connection or through a pipe, in poll() and select() in turn, as
// TestEpollSetPolls does for epoll. Its statistics count those polls with a
// blocking receive's (shm_polls); it makes no blocking receive.
func TestPollSelectPolls(t *testing.T) {
	testWaitPolls(t, "pollspin", "shm_polls", "shm_poll_hits")
}

// testWaitPolls runs tests/c/<name>.c preloaded (by default and with
// SDP_POLL_US=0) and plain; preloaded, the waiting process's statistics
// (the one that prints "poller PID", or the only one) must count polls in
// polls (of which hits found the answer) by default, and none without.
func testWaitPolls(t *testing.T, name, polls, hits string) {
	shim, ctx := setup(t)
	dir := t.TempDir()
	bin := compileOne(ctx, t, dir, name)
	counter := func(t *testing.T, stats, name string) int {
		m := regexp.MustCompile(name + `=(\d+) `).FindStringSubmatch(stats)
		require.NotNil(t, m, "%s in the statistics line:\n%s", name, stats)
		v, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		name string
		env  []string
	}{{"polls", nil}, {"no-polls", []string{"SDP_POLL_US=0"}}, {"plain", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, bin)
			if tc.name == "plain" {
				cmd.Env = cleanEnv()
			} else {
				cmd.Env = append(sdpEnv(shim, filepath.Join(dir, tc.name+".%p.log")), tc.env...)
			}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "spin ok")
			if tc.name == "plain" {
				return
			}
			stats := logText(t, dir, tc.name)
			if m := regexp.MustCompile(`poller (\d+)`).FindStringSubmatch(string(out)); m != nil {
				stats = globText(t, filepath.Join(dir, tc.name+"."+m[1]+".log"))
			}
			require.Regexp(t, regexp.MustCompile(`shm_conns=[1-9][0-9]* `), stats, "the connection ran over shared memory")
			p, h := counter(t, stats, polls), counter(t, stats, hits)
			t.Logf("%s: %d polls, %d found the answer; %d doorbells rung", tc.name, p, h,
				counter(t, stats, "shm_bells_rung"))
			if tc.env == nil {
				require.Positive(t, p, "the waits polled")
				require.LessOrEqual(t, h, p)
			} else {
				require.Zero(t, p, "SDP_POLL_US=0: no polls")
			}
		})
	}
}
