#!/usr/bin/env bash
# Plain TCP and libsdp side by side for a few cases, in one run: on 127.0.0.1 and between two
# network namespaces joined by a veth pair (MTU 1500) that this script creates and removes.
# A quicker look than `make bench` at the sizes a change is about; same program (sdpbench),
# same method, both ends SDP_MODE=sdp.
#
#   bash scripts/bench-pair.sh
#   PAIR_NETS="lo veth"                       where to run
#   PAIR_CASES="bw:65536,1048576,4194304 lat:65536,1048576"   test:sizes, space-separated
#   PAIR_RUNS=10                              runs per point (the median is printed)
#   PAIR_ENV="SDP_FLOW_CONTROL=transport"     extra environment for the libsdp side
#   PAIR_LIB=DIR                              libsdp.so and libsdp-engine.so (default build/)
#
# Prints one line per point: network, test, size, TCP's median, libsdp's, the ratio, and the
# engine's counters for the case (FPDUs, records, zero-copy offers and cancels) from SDP_STATS.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

require_cmd gcc ip timeout
lib=${PAIR_LIB:-$LIBSDP_ROOT/build}
[[ -f $lib/libsdp.so && -f $lib/libsdp-engine.so ]] || die "no libsdp.so and libsdp-engine.so in $lib (make all)"
nets=${PAIR_NETS:-lo veth}
cases=${PAIR_CASES:-bw:65536,1048576,4194304 lat:65536,1048576}
runs=${PAIR_RUNS:-10}
tmp=$(mktemp -d)
veth_names sdppair 232
cleanup() {
	veth_down
	rm -rf "$tmp"
}
trap cleanup EXIT
gcc -O2 -std=c11 -Wall -Wextra -Werror -o "$tmp/sdpbench" "$here/bench/sdpbench.c"

# one NET CFG TEST SIZES: runs one server and one client; the client's lines go to stdout.
one() {
	local net=$1 cfg=$2 test=$3 sizes=$4 srv=() cli=() addr=127.0.0.1 port
	if [[ $net == veth ]]; then
		srv=(ip netns exec "$NS_A") cli=(ip netns exec "$NS_B") addr=$ADDR_A
		port=$((30000 + RANDOM % 20000))
	else
		port=$(free_port)
	fi
	local envv=(SDP_STATS=0)
	# shellcheck disable=SC2206
	[[ $cfg == sdp ]] && envv=(LD_PRELOAD="$lib/libsdp.so" SDP_MODE=sdp SDP_STATS=1 ${PAIR_ENV:-})
	rm -f "$tmp/server.out" # no "ready" of the last server
	"${srv[@]}" env -u LD_PRELOAD "${envv[@]}" SDPBENCH_TIMEOUT=300 "$tmp/sdpbench" server "$addr" "$port" \
		>"$tmp/server.out" 2>"$tmp/server.err" &
	local spid=$!
	for _ in $(seq 1 500); do
		grep -q ready "$tmp/server.out" 2>/dev/null && break
		kill -0 "$spid" 2>/dev/null || die "server exited: $(cat "$tmp/server.err")"
		sleep 0.02
	done
	"${cli[@]}" env -u LD_PRELOAD "${envv[@]}" SDPBENCH_TIMEOUT=300 timeout -k 5 300 "$tmp/sdpbench" client "$addr" "$port" \
		"$test" "$sizes" runs="$runs" budget=0.4 miniters=5 bytes=33554432 2>"$tmp/client.err" ||
		warn "$net $cfg $test: client failed: $(tail -n 2 "$tmp/client.err")"
	wait "$spid" || true
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

printf '%-5s %-4s %9s %10s %10s %6s  %s\n' net test size tcp libsdp ratio "libsdp sender: counters"
for net in $nets; do
	[[ $net == veth ]] && veth_up
	for c in $cases; do
		test=${c%%:*} sizes=${c#*:}
		mapfile -t tcp < <(one "$net" tcp "$test" "$sizes")
		for s in ${sizes//,/ }; do
			# each libsdp point on its own connection, so the counters are that point's
			line=$(one "$net" sdp "$test" "$s")
			stats=$(grep -h 'libsdp: stats' "$tmp/client.err" | tail -n 1)
			t=$(printf '%s\n' "${tcp[@]}" | grep " size=$s " || true)
			tv=$(field median "$t") sv=$(field median "$line")
			ratio=$(awk -v a="$sv" -v b="$tv" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2f", a / b }')
			printf '%-5s %-4s %9s %10.1f %10.1f %6s  fpdus_tx=%s payload_tx=%s zcopy_read_sends=%s zcopy_cancels=%s\n' \
				"$net" "$test" "$s" "${tv:-0}" "${sv:-0}" "$ratio" "$(field fpdus_tx "$stats")" \
				"$(field payload_tx "$stats")" "$(field zcopy_read_sends "$stats")" "$(field zcopy_cancels "$stats")"
		done
	done
done
