package main

// The engine publishes its process's sockets for sdpstat: every
// publishInterval, a JSON snapshot (internal/statsfile) of the interposer's
// socket table joined with the engine's counters of each SDP connection.

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"libsdp/internal/statsfile"
	"libsdp/sdpcore"
)

const publishInterval = 500 * time.Millisecond

var pub struct {
	mu      sync.Mutex
	dir     string
	uid     int
	pid     int
	start   uint64
	exe     string
	stopped bool
	dirOK   bool // the directory passed its checks
	broken  bool // publishing failed; logged once
	// addrs remembers the application's view of each connection, so a
	// connection still closing after the application closed its
	// descriptor keeps its addresses.
	addrs map[*sdpcore.Conn]statsfile.Socket
}

// startStatsPublisher starts the goroutine that, once the process has
// lived one publishInterval, removes files of processes that are gone,
// publishes, and then keeps the file fresh until the process exits. A
// short-lived process (a curl, a forked worker serving one request) so pays
// nothing for sdpstat, which could hardly have shown it: at start, the
// directory's checks, the cleaning and the first snapshot cost it about
// 5% of its CPU time. Nothing of it runs inside the engine's
// initialisation, which the interposer performs in the middle of an
// application's call.
//
// The same tick gives back the ring pages of quiet shared-memory
// connections (trimIdle), whether or not sdpstat can be served.
func startStatsPublisher() {
	go func() {
		t := time.NewTicker(publishInterval)
		defer t.Stop()
		<-t.C
		publishing := openStatsDir()
		for {
			trimIdle()
			if publishing {
				publishing = publish()
			}
			<-t.C
		}
	}()
}

// trimIdle offers every connection the engine drives the chance to give
// back the pages of a ring it has left idle since the last tick
// (sdpcore.Conn.TrimIdle). Safely: a panic in one costs that one only.
func trimIdle() {
	mu.RLock()
	cs := make([]*sdpcore.Conn, 0, len(conns.m))
	for _, c := range conns.m {
		cs = append(cs, c)
	}
	mu.RUnlock()
	for _, c := range cs {
		safely(func() { c.TrimIdle() })
	}
}

func openStatsDir() bool {
	pub.mu.Lock()
	defer pub.mu.Unlock()
	pub.uid, pub.pid = os.Getuid(), os.Getpid()
	pub.dir = statsfile.Dir(pub.uid)
	pub.start, _ = statsfile.StartTicks(pub.pid)
	pub.exe = statsfile.Exe(pub.pid)
	pub.addrs = map[*sdpcore.Conn]statsfile.Socket{}
	if pub.stopped {
		return false
	}
	if err := statsfile.EnsureDir(pub.dir, pub.uid); err != nil {
		pub.broken = true
		logf(levelWarn, "sdpstat disabled: %v", err)
		return false
	}
	pub.dirOK = true
	statsfile.Clean(pub.dir)
	return true
}

// publish writes one snapshot; false means publishing has ended.
func publish() (more bool) {
	defer func() {
		if r := recover(); r != nil {
			onPanic(-1, r)
			more = true
		}
	}()
	p := snapshot()
	data, err := json.Marshal(p)
	if err != nil {
		logf(levelWarn, "sdpstat: %v", err)
		return true
	}
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if pub.stopped {
		return false
	}
	if err := statsfile.Write(pub.dir, pub.uid, pub.pid, data); err != nil && !pub.broken {
		pub.broken = true
		logf(levelWarn, "sdpstat: %v", err)
	}
	return true
}

// stopStatsPublisher removes the process's file; nothing is published
// after it. The interposer calls it when the process exits.
func stopStatsPublisher() {
	pub.mu.Lock()
	defer pub.mu.Unlock()
	pub.stopped = true
	if pub.dirOK {
		statsfile.Remove(pub.dir, pub.pid)
	}
}

// snapshot joins the interposer's table with the engine's connections.
func snapshot() *statsfile.Process {
	p := &statsfile.Process{
		Version:      statsfile.Version,
		PID:          pub.pid,
		Prog:         ecfg.prog,
		StartTicks:   pub.start,
		Exe:          pub.exe,
		EngineLoaded: true,
		Totals:       statsfile.ParseKeyValues(statsLine()),
		Sockets:      []statsfile.Socket{},
	}
	var rows []statsfile.Socket
	for _, line := range strings.Split(shimSnapshot(), "\n") {
		if s, ok := statsfile.ParseShimLine(line); ok {
			rows = append(rows, s)
		}
	}
	mu.RLock()
	byFd := make(map[int]*sdpcore.Conn, len(conns.m))
	for fd, c := range conns.m {
		byFd[fd] = c
	}
	var closing []*sdpcore.Conn
	lingerMu.Lock()
	for c := range lingering {
		closing = append(closing, c)
	}
	lingerMu.Unlock()
	mu.RUnlock()

	seen := map[*sdpcore.Conn]statsfile.Socket{}
	for _, s := range rows {
		s.State = tcpState(s.FD)
		if c := byFd[s.FD]; c != nil {
			s.SDP = sdpInfo(c, "")
			seen[c] = s
		}
		p.Sockets = append(p.Sockets, s)
	}
	for _, c := range closing {
		s, ok := pub.addrs[c]
		if !ok {
			s = statsfile.Socket{Transport: "sdp"}
		}
		s.FD, s.Kind = c.Fd(), "closing"
		s.State = tcpState(c.Fd())
		s.SDP = sdpInfo(c, "closing")
		seen[c] = s
		p.Sockets = append(p.Sockets, s)
	}
	// Only the publisher goroutine touches addrs.
	pub.addrs = seen
	p.UpdatedMs = time.Now().UnixMilli()
	return p
}

func sdpInfo(c *sdpcore.Conn, state string) *statsfile.SDP {
	st := c.Stats()
	if state == "" {
		state = "handshake"
		if st.Up {
			state = "up"
		}
	}
	link := "iwarp"
	if st.SharedMemory {
		link = "shm"
	}
	s := &statsfile.SDP{
		State:           state,
		Link:            link,
		ShmNote:         st.SameHostNote,
		FlowControl:     st.FlowControl,
		Buffering:       st.Buffering,
		Progress:        st.Progress,
		Markers:         st.Markers,
		CRC:             st.CRC,
		PayloadTx:       st.PayloadTx,
		PayloadRx:       st.PayloadRx,
		WireTx:          st.Tx.Bytes,
		WireRx:          st.Rx.Bytes,
		MsgsTx:          st.MsgsTx,
		MsgsRx:          st.MsgsRx,
		FPDUsTx:         st.Tx.FPDUs,
		FPDUsRx:         st.Rx.FPDUs,
		MarkersTx:       st.Tx.Markers,
		MarkersRx:       st.Rx.Markers,
		CRCBytesRx:      st.Rx.CRCBytes,
		CRCErrors:       st.Rx.CRCErrors,
		CreditUpdates:   st.CreditUpdates,
		CreditStalls:    st.CreditStalls,
		UserCopiesTx:    st.UserCopiesTx,
		UserCopiesRx:    st.UserCopiesRx,
		Coalesced:       st.CoalescedSends,
		BCopySends:      st.BCopySends,
		ZCopySends:      st.ZCopyReadSends,
		ZCopyCancels:    st.ZCopyCancels,
		ZCopyTx:         st.ZCopyTx,
		ZCopyRx:         st.ZCopyRx,
		ZCopySinkAvails: st.ZCopySinkAvails,
		ZCopyWriteSends: st.ZCopyWriteSends,
		ZCopyWriteRx:    st.ZCopyWriteRx,
		TxRecords:       st.TxRecords,
		RingAcks:        st.RingAcks,
		DirectRx:        st.DirectPlacedRx,
		// What did not go by RDMA Read went by buffer copy.
		BCopyTx: st.PayloadTx - min(st.PayloadTx, st.ZCopyTx),
		BCopyRx: st.PayloadRx - min(st.PayloadRx, st.ZCopyRx),
	}
	s.SetCopiesPerByte()
	return s
}

// tcpState asks the kernel (a raw getsockopt, not libc) for fd's TCP state.
func tcpState(fd int) string {
	if fd < 0 {
		return ""
	}
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return ""
	}
	return statsfile.TCPStateName(info.State)
}
