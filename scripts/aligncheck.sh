#!/usr/bin/env bash
# Measures FPDU alignment on the wire between two hosts (RFC 5044 §5: a sender should begin every
# TCP segment with an FPDU), which loopback captures cannot show: between two network namespaces
# joined by a veth pair that takes one segment per buffer (gso_max_segs 1), so that tcpdump sees
# the segments themselves rather than the kernel's 64 KiB buffers, NetPIPE (NPtcp, both ends
# preloaded) exchanges messages of each size for ALIGN_SECONDS while tcpdump records the SDP
# connection, and scripts/mpacheck.py walks the capture: it checks every FPDU (framing, markers,
# CRC) and counts the segments that begin inside an FPDU. Alignment is SDP_FPDU_ALIGN=on (the
# default, off, sends FPDUs of up to 64 KiB that the kernel cuts; set SDP_FPDU_ALIGN to measure
# another value).
#
# usage: bash scripts/aligncheck.sh [SIZE...]     (default: 4096 65536 300000 octets)
# Environment: LIBSDP_BUILD=dir measures another build; ALIGN_SECONDS (default 2).
# Needs root (namespaces), NPtcp (netpipe-tcp), tcpdump and tshark.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

require_cmd NPtcp tcpdump tshark
require_build
secs=${ALIGN_SECONDS:-2}
align=${SDP_FPDU_ALIGN:-on}
[[ $secs =~ ^[1-9][0-9]*$ ]] || die "ALIGN_SECONDS=$secs is not a whole number of seconds"
sizes=("$@")
((${#sizes[@]})) || sizes=(4096 65536 300000)

tmp=$(mktemp -d)
veth_names algn 68
trap 'stop_all; veth_down; rm -rf "$tmp"' EXIT
veth_up
ip -n "$NS_A" link set "$VETH_A" gso_max_segs 1
ip -n "$NS_B" link set "$VETH_B" gso_max_segs 1

port=41300
bad=0
for size in "${sizes[@]}"; do
	[[ $size =~ ^[1-9][0-9]*$ ]] || die "size $size is not a number of octets"
	port=$((port + 1))
	start_bg "$tmp/server.out" ip netns exec "$NS_A" env LD_PRELOAD="$LIBSDP_SO" SDP_ENGINE="$LIBSDP_ENGINE" SDP_FPDU_ALIGN="$align" \
		NPtcp -P "$port" -l "$size" -u "$size" -p 0
	server=$BG_PID
	for _ in $(seq 1 100); do
		ip netns exec "$NS_A" ss -ltn "sport = :$port" | grep -q LISTEN && break
		sleep 0.05
	done
	start_bg "$tmp/tcpdump.out" ip netns exec "$NS_A" timeout $((secs + 5)) \
		tcpdump -i "$VETH_A" -s 0 -U -w "$tmp/cap.pcap" "tcp port $(sdp_port "$port")"
	dump=$BG_PID
	for _ in $(seq 1 100); do
		grep -q 'listening on' "$tmp/tcpdump.out" 2>/dev/null && break
		sleep 0.05
	done
	(cd "$tmp" && ip netns exec "$NS_B" env LD_PRELOAD="$LIBSDP_SO" SDP_ENGINE="$LIBSDP_ENGINE" SDP_FPDU_ALIGN="$align" \
		timeout "$secs" NPtcp -h "$ADDR_A" -P "$port" -l "$size" -u "$size" -p 0 -o "$tmp/np.out" \
		>/dev/null 2>&1) || true
	stop_proc "$server" 5
	stop_proc "$dump" 5
	echo "$size octets a message:"
	if ! walk=$("$PYTHON" "$here/mpacheck.py" "$tmp/cap.pcap" "$(sdp_port "$port")" 2>&1); then
		bad=1
	fi
	grep -E 'side \(port|cut short|expected|does not start' <<<"$walk" | sed -e 's/, at stream offsets.*//'
	if grep -qE 'begin inside an FPDU=[1-9]' <<<"$walk"; then
		bad=1
	fi
	rm -f "$tmp/cap.pcap"
done
((bad == 0)) || die "FPDUs were misframed, or segments began inside FPDUs (above)"
info "every segment seen began with an FPDU, and every FPDU checked out"
