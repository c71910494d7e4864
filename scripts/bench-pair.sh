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
NS_A=sdppair-a-$$ NS_B=sdppair-b-$$ VETH_A=sdpp$$a VETH_B=sdpp$$b
ADDR_A=10.232.$(($$ % 200)).1 ADDR_B=10.232.$(($$ % 200)).2
ns_up=0
cleanup() {
	if ((ns_up)); then
		ip netns del "$NS_A" 2>/dev/null || true
		ip netns del "$NS_B" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
gcc -O2 -std=c11 -Wall -Wextra -Werror -o "$tmp/sdpbench" "$here/bench/sdpbench.c"

veth_up() {
	ip netns add "$NS_A"
	ip netns add "$NS_B"
	ns_up=1
	ip link add "$VETH_A" type veth peer name "$VETH_B"
	ip link set "$VETH_A" netns "$NS_A"
	ip link set "$VETH_B" netns "$NS_B"
	ip -n "$NS_A" addr add "$ADDR_A/24" dev "$VETH_A"
	ip -n "$NS_B" addr add "$ADDR_B/24" dev "$VETH_B"
	ip -n "$NS_A" link set lo up
	ip -n "$NS_B" link set lo up
	ip -n "$NS_A" link set "$VETH_A" up
	ip -n "$NS_B" link set "$VETH_B" up
	for _ in $(seq 1 50); do
		ip -n "$NS_B" link show "$VETH_B" | grep -q LOWER_UP &&
			ip -n "$NS_A" link show "$VETH_A" | grep -q LOWER_UP && return 0
		sleep 0.1
	done
	die "veth link between $NS_A and $NS_B does not come up"
}

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
