package main

// A preloaded process publishes its statistics only once its engine is
// loaded, at its first SDP connection. Until then (a server waiting for
// its first client, a program whose connections all fell back to TCP)
// sdpstat finds it in /proc instead: a process that maps libsdp.so uses
// libsdp, and the kernel's socket tables give its sockets.

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"libsdp/internal/settings"
	"libsdp/internal/statsfile"
)

// isShimPath reports whether a mapped file is the preload shim: libsdp.so
// or a variant of it (libsdp-asan.so), not the engine.
func isShimPath(p string) bool {
	b := filepath.Base(strings.TrimSuffix(p, " (deleted)"))
	if b == "libsdp.so" {
		return true
	}
	return strings.HasPrefix(b, "libsdp-") && strings.HasSuffix(b, ".so") && b != "libsdp-engine.so"
}

// mapsShim reports whether the maps file content names the shim.
func mapsShim(maps []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '/'); i >= 0 && isShimPath(line[i:]) {
			return true
		}
	}
	return false
}

// kernelSocket is one row of /proc/<pid>/net/tcp or tcp6.
type kernelSocket struct {
	local, remote string
	lport         int
	state         string
}

// parseNetTCP reads a /proc/net/tcp{,6} table into inode → socket.
func parseNetTCP(data []byte, into map[uint64]kernelSocket) {
	lines := strings.Split(string(data), "\n")
	for _, line := range lines[min(1, len(lines)):] {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		local, lport, ok1 := parseHexAddr(f[1])
		remote, _, ok2 := parseHexAddr(f[2])
		st, err1 := strconv.ParseUint(f[3], 16, 8)
		inode, err2 := strconv.ParseUint(f[9], 10, 64)
		if !ok1 || !ok2 || err1 != nil || err2 != nil || inode == 0 {
			continue
		}
		into[inode] = kernelSocket{local: local, remote: remote, lport: lport, state: statsfile.TCPStateName(uint8(st))}
	}
}

// parseHexAddr decodes "0100007F:1F90" (IPv4) or the 32-digit IPv6 form:
// the address is in 32-bit words of host (little-endian) order.
func parseHexAddr(s string) (string, int, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, false
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", 0, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", 0, false
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		ip[w], ip[w+1], ip[w+2], ip[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	if v4 := ip.To4(); v4 != nil && len(raw) == 16 && !ip.Equal(net.IPv6zero) {
		ip = v4
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port))), int(port), true
}

// portOffset is the process's SDP_PORT_OFFSET (environ holds NUL-separated
// NAME=value pairs; getenv takes the first of a name), the default when
// unset or bad, as the shim reads it.
func portOffset(environ []byte) int {
	prefix := []byte(settings.PortOffset.Name + "=")
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			n, _ := settings.PortOffset.Parse(string(v)) // the shim reports a bad value
			return int(n)
		}
	}
	return int(settings.PortOffset.Def())
}

// sdpPortOf maps an application port to its SDP port (the shim's sdp_port).
func sdpPortOf(port, offset int) int {
	const span = 65536 - 1024
	return ((port-1024+offset)%span+span)%span + 1024
}

// kernelSockets lists pid's TCP sockets from the kernel's view, one row
// per descriptor. A listener and the hidden SDP listener on its mapped port
// become one row, as the engine's snapshot shows them.
func kernelSockets(pid int) []statsfile.Socket {
	proc := "/proc/" + strconv.Itoa(pid)
	table := map[uint64]kernelSocket{}
	for _, name := range []string{"tcp", "tcp6"} {
		if b, err := os.ReadFile(proc + "/net/" + name); err == nil {
			parseNetTCP(b, table)
		}
	}
	ents, err := os.ReadDir(proc + "/fd")
	if err != nil {
		return nil
	}
	type fdSock struct {
		fd int
		ks kernelSocket
	}
	var socks []fdSock
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		link, err := os.Readlink(proc + "/fd/" + e.Name())
		if err != nil {
			continue
		}
		var inode uint64
		if _, err := fmt.Sscanf(link, "socket:[%d]", &inode); err != nil {
			continue
		}
		if ks, ok := table[inode]; ok {
			socks = append(socks, fdSock{fd, ks})
		}
	}
	sort.Slice(socks, func(i, j int) bool { return socks[i].fd < socks[j].fd })

	env, _ := os.ReadFile(proc + "/environ")
	off := portOffset(env)
	listening := map[int]bool{}
	for _, s := range socks {
		if s.ks.state == "listen" {
			listening[s.ks.lport] = true
		}
	}
	hidden := map[int]bool{}
	for p := range listening {
		if q := sdpPortOf(p, off); listening[q] && q != p {
			hidden[q] = true
		}
	}
	var out []statsfile.Socket
	for _, s := range socks {
		row := statsfile.Socket{FD: s.fd, Local: s.ks.local, State: s.ks.state, Transport: "-",
			Reason: "engine not loaded"}
		if s.ks.state == "listen" {
			if hidden[s.ks.lport] {
				continue
			}
			row.Kind, row.Transport, row.Reason = "listen", "tcp", ""
			if q := sdpPortOf(s.ks.lport, off); listening[q] {
				row.Transport, row.SDPPort = "tcp+sdp", q
			}
		} else {
			row.Kind, row.Remote = "connected", s.ks.remote
		}
		out = append(out, row)
	}
	return out
}

// scanPreloaded returns the processes that map the shim and publish no
// statistics (their pids not in have). Processes the caller may not
// inspect are left out.
func scanPreloaded(have map[int]bool) []statsfile.Entry {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []statsfile.Entry
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || have[pid] {
			continue
		}
		maps, err := os.ReadFile("/proc/" + e.Name() + "/maps")
		if err != nil || !mapsShim(maps) {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		start, _ := statsfile.StartTicks(pid)
		p := statsfile.Process{
			Version:    statsfile.Version,
			PID:        pid,
			Prog:       strings.TrimSpace(string(comm)),
			StartTicks: start,
			Exe:        statsfile.Exe(pid),
			Sockets:    kernelSockets(pid),
		}
		if p.Sockets == nil {
			p.Sockets = []statsfile.Socket{}
		}
		out = append(out, statsfile.Entry{Process: p, Path: "/proc/" + e.Name()})
	}
	return out
}
