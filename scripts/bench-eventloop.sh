#!/usr/bin/env bash
# An event loop's requests on one host: redis-server and redis-benchmark (GET, 50 connections,
# each an epoll event loop), plain TCP and libsdp (both ends preloaded, the default
# configuration: shared memory) in turn, ROUNDS rounds. Prints GET/s with the ratio to TCP's in
# the same round, the CPU each process spent per GET (the server's from /proc, the client's
# from perf stat when perf is there), and the doorbells each side rang (the engines' exit
# statistics): over shared memory a doorbell is a one-octet TCP send that wakes a peer
# announced asleep, as costly as TCP's own reply. LIBSDP_BUILD=dir measures another build.
#
#   bash scripts/bench-eventloop.sh [ROUNDS=3] [GETS=400000] [CONNECTIONS=50]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"
require_build
PATH=$PATH:/usr/sbin:/sbin require_cmd redis-server redis-benchmark awk
rounds=${1:-3} gets=${2:-400000} conns=${3:-50}
tmp=$(mktemp -d /tmp/libsdp-eventloop.XXXXXX)
trap 'stop_all; rm -rf "$tmp"' EXIT
perf=()
if command -v perf >/dev/null 2>&1 && perf stat -e task-clock -o /dev/null true >/dev/null 2>&1; then
	perf=(perf stat -x, -e task-clock -o "$tmp/perf.txt")
fi

# one CFG: one run, plain TCP (tcp) or both ends preloaded (sdp); prints its line and keeps
# the rate in $rate.
one() {
	local cfg=$1 pre=() port
	[[ $cfg == sdp ]] && pre=("LD_PRELOAD=$LIBSDP_SO" "SDP_ENGINE=$LIBSDP_ENGINE" SDP_STATS=1)
	port=$(free_port)
	start_bg "$tmp/server.out" "${pre[@]}" redis-server --bind 127.0.0.1 --port "$port" \
		--save '' --appendonly no
	local srv=$BG_PID
	wait_listen "$srv" 20 "$port"
	local t0 t1
	t0=$(cpu_ms "$srv")
	env -u LD_PRELOAD "${pre[@]}" "${perf[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -t get \
		-n "$gets" -c "$conns" -q </dev/null >"$tmp/client.out" 2>"$tmp/client.err"
	t1=$(cpu_ms "$srv")
	stop_proc "$srv"
	rate=$(tr '\r' '\n' <"$tmp/client.out" | awk '$1 == "GET:" && $2 ~ /^[0-9.]+$/ { r = $2 } END { print r + 0 }')
	local srv_us cli_us=-
	srv_us=$(awk -v a="$t0" -v b="$t1" -v n="$gets" 'BEGIN { printf "%.1f", (b - a) / n * 1e3 }')
	if ((${#perf[@]})); then
		cli_us=$(awk -F, -v n="$gets" '$3 == "task-clock" { printf "%.1f", $1 * 1000 / n }' "$tmp/perf.txt")
	fi
	local bells=""
	if [[ $cfg == sdp ]]; then
		local s c
		s=$(stats_line "$tmp/server.out") c=$(stats_line "$tmp/client.err")
		[[ $(stat_num "$c" shm_conns) -gt 0 ]] || warn "the client's connections did not use shared memory"
		bells="   doorbells: server $(stat_num "$s" shm_bells_rung), client $(stat_num "$c" shm_bells_rung)"
	fi
	printf '%-4s %9.0f GET/s   CPU per GET: server %s µs, client %s µs%s' \
		"$cfg" "$rate" "$srv_us" "$cli_us" "$bells"
}

info "redis-benchmark -t get -n $gets -c $conns, $rounds rounds; libsdp: both ends preloaded"
for r in $(seq 1 "$rounds"); do
	one tcp
	tcp=$rate
	echo
	one sdp
	awk -v a="$rate" -v b="$tcp" 'BEGIN { if (b > 0) printf "   (%.2fx TCP)\n", a / b; else print "" }'
done
