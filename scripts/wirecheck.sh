#!/usr/bin/env bash
# Checks libsdp's wire format with an independent decoder: Wireshark's iWARP dissectors.
#
# For each configuration, an unmodified curl downloads a small file from python's http.server,
# both under LD_PRELOAD=build/libsdp.so, while tcpdump records the loopback traffic on the
# ports in use. tshark then decodes the capture, and the check fails unless:
#   - an MPA Request and an MPA Reply are seen,
#   - FPDUs are seen, and every FPDU decodes as DDP/RDMAP,
#   - every checked CRC is good (no "Bad CRC32"),
#   - no frame is malformed, and no TCP payload on the SDP connection is left undecoded,
#   - scripts/mpacheck.py, an independent walk of the MPA streams, finds every FPDU, marker
#     and CRC valid.
#
# Configurations: the defaults (markers and CRC on), SDP_MARKERS=0 (CRC only), and
# SDP_MARKERS=0 SDP_CRC=0.
#
# Then iwarp/internal/allops, which carries every RDMAP opcode libsdp implements (Send, Send
# with SE, Send with Invalidate, Send with SE and Invalidate, RDMA Write, Read Request, Read
# Response, Terminate, Immediate Data with and without SE) over one loopback connection, is
# captured four times, with markers and CRC on, with both off, with markers and CRC on after an
# MPA revision 2 (RFC 6581) exchange whose ready-to-receive message is a zero-length RDMA Write,
# and with FPDUs cut for 800-octet segments, one of which ends exactly on a marker position
# (RFC 5044 §4.3: that marker is the next FPDU's; tshark 4.0 counts it in this one and may lose
# its framing after it, so its counts stop there and the independent walk checks the rest).
# Each must pass the same checks and show every one of those opcodes.
# Environment: WIRECHECK_SIZE (bytes, default 2 MiB), WIRECHECK_KEEP=1 keeps the captures.
# With --pcap FILE --sdp-port PORT it only checks an existing capture.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

# count prints the number of whitespace-separated words on stdin.
count() { wc -w | tr -d ' '; }

# tsk runs tshark on a capture with the RPC-over-RDMA heuristic off (it claims short Sends) and
# TCP's heuristic dissectors (MPA's) tried before those registered on a port: the kernel picks
# the connections' ports, and one can be another protocol's (34980 is EtherCAT's, which took a
# whole connection once).
TSHARK_OPTS=(--disable-heuristic rpcrdma_iwarp -o tcp.try_heuristic_first:TRUE)
tsk() {
	local cap=$1
	shift
	tshark -n -r "$cap" "${TSHARK_OPTS[@]}" "$@" 2>/dev/null
}

# tsk_err is tsk with tshark's errors shown (less its warning about running as root).
tsk_err() {
	local cap=$1
	shift
	tshark -n -r "$cap" "${TSHARK_OPTS[@]}" "$@" 2> >(grep -v '^Running as user' >&2)
}

# analyze CAP SDPPORT [DROPPED [MARKER_END]]: decodes a capture with tshark, prints the counts
# and appends to the caller's array "problems" every check that fails; with MARKER_END=1 the
# capture must hold an FPDU that ends on a marker position.
analyze() {
	local cap=$1 sport=$2 dropped=${3:-} marker_end=${4:-0}
	local err
	if ! err=$(tsk_err "$cap" -c 1 2>&1 >/dev/null); then
		die "tshark cannot read $cap: $err"
	fi

	# The capture walked by scripts/mpacheck.py, which shares no code with libsdp or tshark.
	local walk walk_ok=1
	walk=$("$PYTHON" "$here/mpacheck.py" "$cap" "$sport" 2>&1) || walk_ok=0

	# tshark 4.0 misreads an FPDU that ends exactly on a marker position (it counts the next
	# FPDU's marker in it, see the note below) and may lose its framing for the rest of that
	# direction. When the walk is clean, tshark's counts cover each direction up to the first
	# such FPDU the walk lists, and the walk alone covers the rest.
	local scope='' cut=''
	if ((walk_ok)); then
		local f_port f_off
		while read -r f_port f_off; do
			[[ -n $f_port ]] || continue
			scope+="${scope:+ || }(tcp.srcport == $f_port && tcp.seq >= $((f_off + 1)))"
			cut+="${cut:+, }port $f_port from stream offset $f_off"
		done < <(sed -nE 's/.*\(port ([0-9]+)\): FPDUs that end on a marker position: [1-9][0-9]*, at stream offsets ([0-9]+).*/\1 \2/p' <<<"$walk")
		[[ -z $scope ]] || scope="!($scope)"
	fi
	# scoped FILTER: FILTER limited to the part of the capture tshark's counts cover.
	scoped() { if [[ -n $scope ]]; then echo "($1) && $scope"; else echo "$1"; fi; }

	local frames req rep fpdus ddp good bad markers malformed badlen undecoded
	frames=$(tsk "$cap" -T fields -e frame.number | count)
	req=$(tsk "$cap" -Y iwarp_mpa.req -T fields -e frame.number | count)
	rep=$(tsk "$cap" -Y iwarp_mpa.rep -T fields -e frame.number | count)
	fpdus=$(tsk "$cap" -Y "$(scoped iwarp_mpa.fpdu)" -T fields -E occurrence=a -E aggregator=' ' \
		-e iwarp_mpa.ulpdulength | count)
	ddp=$(tsk "$cap" -Y "$(scoped iwarp_ddp_rdmap)" -T fields -E occurrence=a -E aggregator=' ' \
		-e iwarp_ddp.dv | count)
	local crctxt
	crctxt=$(mktemp "${TMPDIR:-/tmp}/libsdp-crc.XXXXXX")
	tsk "$cap" -Y "$(scoped iwarp_mpa.crc_check)" -V -O iwarp_mpa >"$crctxt" || true
	good=$(grep -c 'Good CRC32' "$crctxt" || true)
	bad=$(grep -c 'Bad CRC32' "$crctxt" || true)
	rm -f "$crctxt"
	markers=$(tsk "$cap" -Y "$(scoped iwarp_mpa.markers)" -T fields -E occurrence=a -E aggregator=' ' \
		-e iwarp_mpa.marker_fpduptr | count)
	malformed=$(tsk "$cap" -Y "$(scoped _ws.malformed)" -T fields -e frame.number | count)
	badlen=$(tsk "$cap" -Y iwarp_mpa.bad_length -T fields -e frame.number | count)
	# Segments TCP analysis flags as resent or reordered are copies of octets decoded elsewhere
	# (loopback captures show the odd spurious retransmission).
	local undec="tcp.port == $sport && tcp.len > 0 && !iwarp_mpa && !tcp.analysis.retransmission && !tcp.analysis.spurious_retransmission && !tcp.analysis.out_of_order"
	undecoded=$(tsk "$cap" -Y "$(scoped "$undec")" -T fields -e frame.number | count)
	# Flags of the MPA Request and Reply; tshark prints booleans as 1/0 (or True/False).
	local flags crcon markon
	flags=$(tsk "$cap" -Y 'iwarp_mpa.req || iwarp_mpa.rep' -T fields -e iwarp_mpa.key.req \
		-e iwarp_mpa.marker_flag -e iwarp_mpa.crc_flag -e iwarp_mpa.rej_flag -e iwarp_mpa.rev |
		sed -e 's/True/1/g' -e 's/False/0/g' |
		awk -F'\t' '{printf "%s%s M=%s C=%s R=%s rev=%s", sep, ($1 != "" ? "Req" : "Rep"),
			$2, $3, $4, $5; sep = ", "}')
	# CRC is on when either side set C (RFC 5044 §7.1.1); markers are per direction.
	crcon=$(grep -oE 'C=1' <<<"$flags" || true)
	markon=$(grep -oE 'M=1' <<<"$flags" || true)
	local opcodes
	opcodes=$(tsk "$cap" -Y "$(scoped iwarp_ddp_rdmap)" -T fields -E occurrence=a -E aggregator=' ' \
		-e iwarp_rdma.opcode | tr ' ' '\n' | grep -v '^$' | sort | uniq -c |
		awk '{printf "%s%s×%s", sep, $2, $1; sep=" "}')

	printf '  %-34s %s\n' \
		"frames captured (dropped)" "$frames (${dropped:-unknown})" \
		"MPA Request / Reply" "$req / $rep" \
		"MPA Request / Reply flags" "${flags:-none}" \
		"FPDUs (ULPDU_Length fields)" "$fpdus" \
		"decoded as DDP/RDMAP" "$ddp" \
		"RDMAP opcodes (count)" "${opcodes:-none}" \
		"CRCs checked: good / bad" "$good / $bad" \
		"markers decoded" "$markers" \
		"malformed frames" "$malformed" \
		"payload left undecoded (SDP port)" "$undecoded"
	if [[ -n $cut ]]; then
		echo "  tshark's counts stop at the first FPDU that ends on a marker position ($cut);"
		echo "  the independent walk below checks the whole capture."
	fi
	echo "  independent MPA walk (scripts/mpacheck.py):"
	local l
	while IFS= read -r l; do
		echo "  $l"
	done <<<"$walk"

	((walk_ok)) || problems+=("the independent MPA walk found errors")
	((marker_end == 0)) || [[ -n $cut ]] || problems+=("no FPDU ends on a marker position, which this case is for")
	((req >= 1)) || problems+=("no MPA Request frame decoded")
	((rep >= 1)) || problems+=("no MPA Reply frame decoded")
	((fpdus > 0)) || problems+=("no FPDU decoded")
	((ddp == fpdus)) || problems+=("$fpdus FPDUs but $ddp DDP/RDMAP headers decoded")
	((bad == 0)) || problems+=("$bad FPDUs with a bad CRC")
	((malformed == 0)) || problems+=("$malformed malformed frames")
	((badlen == 0)) || problems+=("$badlen MPA frames with a bad private-data length")
	((undecoded == 0)) || problems+=("$undecoded TCP segments on the SDP port carry payload that did not decode as MPA")
	if [[ -n $crcon ]]; then
		((good == fpdus)) || problems+=("CRC negotiated, but only $good of $fpdus FPDUs had their CRC checked")
	fi

	if ((${#problems[@]} > 0)); then
		local p
		for p in "${problems[@]}"; do
			printf '  FAIL: %s\n' "$p"
		done
		if ((malformed > 0)); then
			echo "  first malformed frames:"
			tsk "$cap" -Y _ws.malformed | head -n 5 | sed 's/^/    /'
		fi
		if ((undecoded > 0)); then
			echo "  first undecoded frames:"
			tsk "$cap" -Y "$(scoped "$undec")" | head -n 5 | sed 's/^/    /'
			if [[ -n $markon ]]; then
				cat <<-'EOF'
				  Note: markers are on. tshark 4.0's MPA dissector places markers from the TCP
				  sequence number of each segment, assuming one FPDU per segment, and counts one
				  marker too many when an FPDU ends exactly on a 512-octet marker position (the
				  marker there belongs to the next FPDU, RFC 5044 §4.3). Either loses its framing
				  for the rest of the connection: compare with the independent walk above.
				EOF
			fi
		fi
		return 1
	fi
	echo "  OK"
}

# run_case NAME [VAR=VALUE...]: one capture and its checks; counts failures.
run_case() {
	local name=$1
	shift
	local dir=$tmp/$name
	mkdir -p "$dir"
	local -a problems=()
	info "== $name ${*:-(defaults)} =="

	local port sport
	port=$(free_port)
	sport=$(sdp_port "$port")

	# 1. capture
	start_capture "$dir" "tcp port $port or tcp port $sport"
	local cap_pid=$BG_PID

	# 2. preloaded server and client
	# SDP_FPDU_ALIGN=on: this capture is on loopback, where FPDUs are not aligned by default, and
	# tshark's MPA dissector follows markers only in aligned segments.
	local -a sdpenv=(LD_PRELOAD="$LIBSDP_SO" SDP_STATS=1 SDP_LOG_LEVEL=info SDP_FPDU_ALIGN=on SDP_SHM=0 "$@")
	start_bg "$dir/server.out" "${sdpenv[@]}" SDP_LOG_FILE="$dir/server.%p.log" \
		"$PYTHON" -m http.server --bind 127.0.0.1 --directory "$tmp/www" "$port"
	local srv_pid=$BG_PID
	wait_listen "$srv_pid" 30 "$port" "$sport"

	if ! env -u LD_PRELOAD "${sdpenv[@]}" SDP_LOG_FILE="$dir/client.%p.log" \
		curl -sS --fail --noproxy '*' --max-time 120 -o "$dir/download.bin" \
		"http://127.0.0.1:$port/file.bin"; then
		problems+=("curl failed")
	fi
	stop_proc "$srv_pid" 10
	stop_proc "$cap_pid" 10

	local got=none
	[[ -f $dir/download.bin ]] && got=$(sha "$dir/download.bin")
	[[ $got == "$want" ]] || problems+=("downloaded file differs (sha256 $got, want $want)")

	local cstats
	cstats=$(stats_line "$dir"/client.*.log)
	if [[ -z $cstats ]]; then
		problems+=("no stats line from the client (SDP_STATS=1)")
	elif (($(stat_num "$cstats" sdp_conns) < 1)); then
		problems+=("the client did not use SDP: $cstats")
		grep -ah 'transport=' "$dir"/client.*.log 2>/dev/null | sed 's/^/    /' || true
	fi

	local cap=$dir/cap.pcap
	[[ -s $cap ]] || die "no capture written: $(cat "$dir/capture.out")"
	local dropped
	# "0 packets dropped by kernel"
	dropped=$(sed -nE 's/^([0-9]+) packets? dropped by kernel.*/\1/p' "$dir/capture.out" | head -n 1)
	if ! analyze "$cap" "$sport" "$dropped"; then
		failures=$((failures + 1))
	fi
}

# start_capture DIR FILTER: starts tcpdump on lo writing DIR/cap.pcap (its pid in BG_PID) and
# waits until it captures. Immediate mode: dumpcap's block-buffered capture (TPACKET_V3) was
# seen here to lose the first or the last packets of short transfers on loopback.
start_capture() {
	local dir=$1 filter=$2
	start_bg "$dir/capture.out" tcpdump -i lo -n -U --immediate-mode -B 65536 -s 0 -Z root \
		-w "$dir/cap.pcap" "$filter"
	local pid=$BG_PID deadline=$((SECONDS + 20))
	until grep -q 'listening on' "$dir/capture.out" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null || die "tcpdump failed: $(cat "$dir/capture.out")"
		((SECONDS < deadline)) || die "tcpdump did not start within 20s"
		sleep 0.05
	done
	BG_PID=$pid
}

# run_allops NAME [--marker-end] FLAGS...: captures iwarp/internal/allops and checks the capture
# (--marker-end: analyze's MARKER_END).
run_allops() {
	local name=$1 marker_end=0
	shift
	if [[ ${1:-} == --marker-end ]]; then
		marker_end=1
		shift
	fi
	local dir=$tmp/$name
	mkdir -p "$dir"
	local -a problems=()
	info "== $name (every RDMAP opcode: allops $*) =="

	local port
	port=$(free_port)
	start_capture "$dir" "tcp port $port"
	local cap_pid=$BG_PID
	if ! timeout 60 "$allops" -port "$port" "$@" >"$dir/allops.out" 2>&1; then
		problems+=("allops failed: $(tail -n 3 "$dir/allops.out")")
	fi
	sed 's/^/  /' "$dir/allops.out"
	stop_proc "$cap_pid" 10

	local cap=$dir/cap.pcap
	[[ -s $cap ]] || die "no capture written: $(cat "$dir/capture.out")"
	local dropped
	dropped=$(sed -nE 's/^([0-9]+) packets? dropped by kernel.*/\1/p' "$dir/capture.out" | head -n 1)
	local seen op missing=()
	seen=$(tsk "$cap" -Y iwarp_ddp_rdmap -T fields -E occurrence=a -E aggregator=' ' -e iwarp_rdma.opcode |
		tr ' ' '\n' | grep -v '^$' | sort -u | tr '\n' ' ')
	for op in 0x00 0x01 0x02 0x03 0x04 0x05 0x06 0x07 0x08 0x09; do
		[[ " $seen " == *" $op "* ]] || missing+=("$op")
	done
	((${#missing[@]} == 0)) || problems+=("RDMAP opcodes never decoded: ${missing[*]}")
	if ! analyze "$cap" "$port" "$dropped" "$marker_end"; then
		failures=$((failures + 1))
	fi
}

usage() {
	cat <<EOF
usage: $0                                  capture and check libsdp traffic (needs 'make')
       $0 --pcap FILE --sdp-port PORT      only check an existing capture of SDP traffic
EOF
	exit 2
}

pcap='' pcap_port=''
while (($# > 0)); do
	(($# >= 2)) || usage
	case $1 in
	--pcap) pcap=$2 ;;
	--sdp-port) pcap_port=$2 ;;
	*) usage ;;
	esac
	shift 2
done
require_cmd tshark
[[ -x $PYTHON ]] || die "$PYTHON not found: run 'make deps' first"

if [[ -n $pcap ]]; then
	[[ -n $pcap_port && -r $pcap ]] || usage
	problems=()
	if analyze "$pcap" "$pcap_port"; then
		exit 0
	fi
	exit 1
fi

require_build
require_cmd curl tcpdump ss sha256sum

size=${WIRECHECK_SIZE:-$((2 * 1024 * 1024))}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libsdp-wirecheck.XXXXXX")
cleanup() {
	stop_all
	if [[ ${WIRECHECK_KEEP:-0} == 1 ]]; then
		info "captures kept in $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$tmp/www"
head -c "$size" /dev/urandom >"$tmp/www/file.bin"
want=$(sha "$tmp/www/file.bin")

use_go
allops=$tmp/allops
(cd "$LIBSDP_ROOT" && go build -o "$allops" ./iwarp/internal/allops) || die "cannot build iwarp/internal/allops"

failures=0
run_case defaults
run_case crc-nomarkers SDP_MARKERS=0
run_case nomarkers-nocrc SDP_MARKERS=0 SDP_CRC=0
run_allops allops-markers-crc -markers=true -crc=true
run_allops allops-plain -markers=false -crc=false
run_allops allops-rev2-rtr -markers=true -crc=true -rev=2
# FPDUs cut for 800-octet segments: one of them ends exactly on a marker position.
run_allops allops-marker-end --marker-end -markers=true -crc=true -mss=800

if ((failures > 0)); then
	info "FAILED: $failures of 7 configurations did not decode cleanly"
	exit 1
fi
info "PASSED: Wireshark decodes libsdp's MPA/DDP/RDMAP traffic cleanly"
