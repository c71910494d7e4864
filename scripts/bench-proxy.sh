#!/usr/bin/env bash
# bench-proxy.sh: does a proxy slow libsdp more than it slows TCP? A fresh curl fetches a file
# (2 MiB unless SIZE octets are given) from python3 -m http.server, directly and through haproxy (HTTP mode, the compatibility
# case's configuration), 20 times each; everything preloaded (libsdp) or nothing (TCP), the two
# alternating, on 127.0.0.1. Prints responses per second and the share of the direct rate the
# proxy keeps, and for the fetches through haproxy the CPU time each process spent per response:
# curl (all its threads, the engine's included, from its start to its exit), haproxy and
# http.server. LIBSDP_BUILD=dir measures another build.
#
#   bash scripts/bench-proxy.sh [ROUNDS=2] [SIZE=2097152]
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_build
require_cmd curl haproxy timeout awk
rounds=${1:-2} size=${2:-2097152}
tmp=$(mktemp -d /tmp/libsdp-proxy.XXXXXX)
trap 'stop_all; rm -rf "$tmp"' EXIT
head -c "$size" /dev/urandom >"$tmp/file.bin"

# rate PORT ENV...: responses per second of 20 fresh curls for the file.
rate() {
	local port=$1 total=0 t i
	shift
	for i in $(seq 1 20); do
		t=$(timeout 60 env "$@" curl -sS --fail --noproxy '*' -o /dev/null -w '%{time_total}' \
			"http://127.0.0.1:$port/file.bin")
		total=$(awk -v a="$total" -v b="$t" 'BEGIN { print a + b }')
	done
	awk -v t="$total" 'BEGIN { printf "%.0f", 20 / t }'
}

# fetch_cpu PORT ENV...: 100 fresh curls for the file; the CPU time of one curl process, ms.
fetch_cpu() {
	local port=$1
	shift
	"$PYTHON" - "$port" "$@" <<'PY'
import os, resource, subprocess, sys
port, env = sys.argv[1], dict(os.environ)
env.pop("LD_PRELOAD", None)
env.update(kv.split("=", 1) for kv in sys.argv[2:])
n = 100
for _ in range(n):
    subprocess.run(["curl", "-sS", "--fail", "--noproxy", "*", "-o", "/dev/null",
                    "http://127.0.0.1:%s/file.bin" % port], env=env, check=True, timeout=60)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.2f" % ((r.ru_utime + r.ru_stime) * 1000 / n))
PY
}

for r in $(seq 1 "$rounds"); do
	for cfg in tcp libsdp; do
		pre=()
		[[ $cfg == libsdp ]] && pre=(LD_PRELOAD="$LIBSDP_SO" SDP_ENGINE="$LIBSDP_ENGINE")
		bport=$(free_port) pport=$(free_port)
		[[ $pport != "$bport" ]] || pport=$(free_port)
		haproxy_http_cfg "$tmp/h.cfg" "$pport" "$bport"
		start_bg "$tmp/backend.out" "${pre[@]}" "$PYTHON" -m http.server --bind 127.0.0.1 --directory "$tmp" "$bport"
		backend=$BG_PID
		wait_listen "$BG_PID" 20 "$bport"
		start_bg "$tmp/haproxy.out" "${pre[@]}" haproxy -f "$tmp/h.cfg" -db
		proxy=$BG_PID
		wait_listen "$BG_PID" 20 "$pport"
		d=$(rate "$bport" "${pre[@]}")
		p=$(rate "$pport" "${pre[@]}")
		h0=$(cpu_ms "$proxy") b0=$(cpu_ms "$backend")
		c=$(fetch_cpu "$pport" "${pre[@]}")
		h1=$(cpu_ms "$proxy") b1=$(cpu_ms "$backend")
		printf 'round %d  %-6s  direct %4d responses/s  through haproxy %4d  kept %.2f  CPU ms per response: curl %.2f haproxy %.2f http.server %.2f\n' \
			"$r" "$cfg" "$d" "$p" "$(awk -v a="$p" -v b="$d" 'BEGIN { print a / b }')" \
			"$c" "$(awk -v a="$h0" -v b="$h1" 'BEGIN { print (b - a) / 100 }')" "$(awk -v a="$b0" -v b="$b1" 'BEGIN { print (b - a) / 100 }')"
		stop_all
	done
done
