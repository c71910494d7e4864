#!/usr/bin/env bash
# libsdp demonstration: two unmodified programs, python's http.server and curl, move a 256 MiB
# file over SDP (on a software iWARP stack) just by running under LD_PRELOAD=build/libsdp.so.
# The same download is then repeated over plain TCP, and the two are compared.
#
# It fails (non-zero exit) when a downloaded file differs from the original, or when the
# statistics libsdp prints at exit (SDP_STATS=1) do not show the SDP download really ran
# over SDP. Environment: DEMO_SIZE (bytes, default 256 MiB), DEMO_KEEP=1 keeps the logs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

require_build
require_cmd curl ss sha256sum awk
[[ -x $PYTHON ]] || die "$PYTHON not found: run 'make deps' first"

size=${DEMO_SIZE:-$((256 * 1024 * 1024))}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libsdp-demo.XXXXXX")
cleanup() {
	stop_all
	if [[ ${DEMO_KEEP:-0} == 1 ]]; then
		info "logs kept in $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
hr() { printf '%s\n' "------------------------------------------------------------------------"; }

hr
echo "libsdp demo: curl downloads a $(mib "$size") MiB file from python3 -m http.server"
echo "  1. both programs under LD_PRELOAD=build/libsdp.so  -> SDP over software iWARP"
echo "  2. both programs plain                             -> kernel TCP"
hr

mkdir -p "$tmp/www"
info "writing $(mib "$size") MiB of random data"
head -c "$size" /dev/urandom >"$tmp/www/file.bin"
want=$(sha "$tmp/www/file.bin")

# download NAME PRELOAD(0|1): serves the file with http.server and fetches it with curl, both
# preloaded or both plain. Sets dl_sha, dl_speed (bytes/s), dl_port.
download() {
	local name=$1 preload=$2
	local port
	port=$(free_port)
	dl_port=$port
	local -a envs=()
	local -a ports=("$port")
	if ((preload)); then
		envs=(LD_PRELOAD="$LIBSDP_SO" SDP_STATS=1 SDP_LOG_LEVEL=info)
		ports+=("$(sdp_port "$port")")
	fi

	start_bg "$tmp/$name-server.out" "${envs[@]}" SDP_LOG_FILE="$tmp/$name-server.%p.log" \
		"$PYTHON" -m http.server --bind 127.0.0.1 --directory "$tmp/www" "$port"
	local srv=$BG_PID
	wait_listen "$srv" 30 "${ports[@]}"

	info "$name: curl http://127.0.0.1:$port/file.bin"
	local rc=0
	dl_speed=$(env -u LD_PRELOAD "${envs[@]}" SDP_LOG_FILE="$tmp/$name-client.%p.log" \
		curl -sS --fail --noproxy '*' --max-time 600 -o "$tmp/$name.bin" \
		-w '%{speed_download}' "http://127.0.0.1:$port/file.bin") || rc=$?
	stop_proc "$srv" 15
	((rc == 0)) || {
		warn "$name: curl failed (exit $rc)"
		dl_speed=0
	}
	dl_sha=none
	if [[ -f $tmp/$name.bin ]]; then
		dl_sha=$(sha "$tmp/$name.bin")
		rm -f "$tmp/$name.bin"
	fi
}

download sdp 1
sdp_sha=$dl_sha sdp_speed=$dl_speed sdp_port=$dl_port
download tcp 0
tcp_sha=$dl_sha tcp_speed=$dl_speed tcp_port=$dl_port

cstats=$(stats_line "$tmp"/sdp-client.*.log)
sstats=$(stats_line "$tmp"/sdp-server.*.log)

failed=()
verdict() { # verdict OK? TEXT
	if (($1)); then
		printf '  [ ok ] %s\n' "$2"
	else
		printf '  [FAIL] %s\n' "$2"
		failed+=("$2")
	fi
}

echo
hr
echo "Integrity (sha256 of the original: ${want:0:16}...)"
same_sha() { # same_sha LABEL PORT SHA
	if [[ $3 == "$want" ]]; then
		verdict 1 "$1 download (port $2): sha256 ${3:0:16}... matches"
	else
		verdict 0 "$1 download (port $2): sha256 ${3:0:16}... DIFFERS"
	fi
}
same_sha SDP "$sdp_port" "$sdp_sha"
same_sha TCP "$tcp_port" "$tcp_sha"

echo
echo "SDP evidence (libsdp's statistics, printed by each process at exit)"
row() { printf '  %-58s %14s %14s\n' "$@"; }
row "" "curl (client)" "http.server"
val() {
	local v
	v=$(stat_get "$1" "$2")
	echo "${v:-n/a}"
}
for k in sdp_conns shm_conns tcp_conns fpdus_tx fpdus_rx markers_tx markers_rx crc_bytes_rx crc_errors \
	payload_tx payload_rx; do
	case $k in
	sdp_conns) label="connections over SDP" ;;
	shm_conns) label="of them, over shared memory" ;;
	tcp_conns) label="connections that fell back to TCP" ;;
	fpdus_tx) label="MPA FPDUs sent" ;;
	fpdus_rx) label="MPA FPDUs received" ;;
	markers_tx) label="MPA markers sent (none on one host)" ;;
	markers_rx) label="MPA markers received (none on one host)" ;;
	crc_bytes_rx) label="bytes CRC32c-checked (none on one host)" ;;
	crc_errors) label="CRC errors" ;;
	payload_tx) label="application bytes sent over SDP" ;;
	payload_rx) label="application bytes received over SDP" ;;
	esac
	row "$label ($k)" "$(val "$cstats" "$k")" "$(val "$sstats" "$k")"
done
for f in "$tmp"/sdp-client.*.log "$tmp"/sdp-server.*.log; do
	[[ -f $f ]] || continue
	grep -ah 'transport=' "$f" | head -n 3 | sed "s|^|  $(basename "$f" | cut -d. -f1): |"
done

if [[ -z $cstats ]]; then
	verdict 0 "no stats line from the preloaded curl (was libsdp.so loaded?)"
else
	sc=$(stat_num "$cstats" sdp_conns)
	prx=$(stat_num "$cstats" payload_rx)
	ce=$(stat_num "$cstats" crc_errors)
	verdict "$((sc >= 1))" "curl's connection ran over SDP (sdp_conns=$sc)"
	verdict "$((prx >= size))" \
		"curl received the whole file over SDP (payload_rx=$prx, file $size bytes)"
	verdict "$((ce == 0))" "no CRC errors at curl (crc_errors=$ce)"
fi
if [[ -z $sstats ]]; then
	warn "no stats line from the preloaded http.server"
fi

echo
echo "Throughput (curl's average download speed)"
rate() { awk -v s="$1" 'BEGIN { printf "%.1f MB/s", s / 1e6 }'; }
sdp_label="SDP (software iWARP over TCP)"
[[ $(val "$cstats" shm_conns) =~ ^[1-9] ]] && sdp_label="SDP (shared memory, same host)"
printf '  %-34s %s\n' "$sdp_label" "$(rate "$sdp_speed")" \
	"plain kernel TCP" "$(rate "$tcp_speed")"
ratio=$(awk -v a="$sdp_speed" -v b="$tcp_speed" \
	'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
printf '  %-34s %s\n' "SDP / TCP" "$ratio"
echo "  (both ends on this machine, over loopback, sharing its $(nproc) cores)"
hr

if ((${#failed[@]} > 0)); then
	info "FAILED: ${#failed[@]} check(s) did not hold"
	exit 1
fi
info "PASSED: the file crossed SDP intact, and the same programs still work over plain TCP"
