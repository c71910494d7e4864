#!/usr/bin/env bash
# bench-proxy.sh: does a proxy slow libsdp more than it slows TCP? A fresh curl fetches a 2 MiB
# file from python3 -m http.server, directly and through haproxy (HTTP mode, the compatibility
# case's configuration), 20 times each; everything preloaded (libsdp) or nothing (TCP), the two
# alternating, on 127.0.0.1. Prints responses per second and the share of the direct rate the
# proxy keeps. LIBSDP_BUILD=dir measures another build.
#
#   bash scripts/bench-proxy.sh [ROUNDS=2]
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_build
require_cmd curl haproxy timeout awk
rounds=${1:-2}
tmp=$(mktemp -d /tmp/libsdp-proxy.XXXXXX)
trap 'stop_all; rm -rf "$tmp"' EXIT
head -c $((2 * 1024 * 1024)) /dev/urandom >"$tmp/2M.bin"

# rate PORT ENV...: responses per second of 20 fresh curls for the file.
rate() {
	local port=$1 total=0 t i
	shift
	for i in $(seq 1 20); do
		t=$(timeout 60 env "$@" curl -sS --fail --noproxy '*' -o /dev/null -w '%{time_total}' \
			"http://127.0.0.1:$port/2M.bin")
		total=$(awk -v a="$total" -v b="$t" 'BEGIN { print a + b }')
	done
	awk -v t="$total" 'BEGIN { printf "%.0f", 20 / t }'
}

for r in $(seq 1 "$rounds"); do
	for cfg in tcp libsdp; do
		pre=()
		[[ $cfg == libsdp ]] && pre=(LD_PRELOAD="$LIBSDP_SO" SDP_ENGINE="$LIBSDP_ENGINE")
		bport=$(free_port) pport=$(free_port)
		[[ $pport != "$bport" ]] || pport=$(free_port)
		haproxy_http_cfg "$tmp/h.cfg" "$pport" "$bport"
		start_bg "$tmp/backend.out" "${pre[@]}" "$PYTHON" -m http.server --bind 127.0.0.1 --directory "$tmp" "$bport"
		wait_listen "$BG_PID" 20 "$bport"
		start_bg "$tmp/haproxy.out" "${pre[@]}" haproxy -f "$tmp/h.cfg" -db
		wait_listen "$BG_PID" 20 "$pport"
		d=$(rate "$bport" "${pre[@]}")
		p=$(rate "$pport" "${pre[@]}")
		printf 'round %d  %-6s  direct %4d responses/s  through haproxy %4d  kept %.2f\n' \
			"$r" "$cfg" "$d" "$p" "$(awk -v a="$p" -v b="$d" 'BEGIN { print a / b }')"
		stop_all
	done
done
