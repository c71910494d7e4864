#!/usr/bin/env bash
# What one message costs the kernel, plain TCP beside libsdp (SDP_MODE=sdp at both ends), on
# 127.0.0.1, for one sdpbench case (default: a 1-byte ping-pong):
#   - system calls per message of the client and of the server (`strace -f -c`; each call made
#     more than ITERS/10 times; the engine's Go runtime's own calls printed apart);
#   - TCP segments per message, both directions (`nstat` TcpOutSegs, in a run without strace,
#     which would change how the kernel merges them; other traffic on the machine counts too).
# A message is a round trip for `lat`, one message of SIZE bytes for `bw`.
#
#   bash scripts/bench-syscalls.sh                       # lat 1
#   bash scripts/bench-syscalls.sh bw 256 nodelay=1      # small-message streaming
#   bash scripts/bench-syscalls.sh bw 65536              # bulk (SDP_ZCOPY_THRESHOLD=32768 in the environment: zero copy)
#   SYSCALL_ITERS=6000 (messages per run)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

require_cmd gcc strace timeout nstat
require_build
iters=${SYSCALL_ITERS:-6000}
test=${1:-lat}
size=${2:-1}
extra=("${@:3}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export NSTAT_HISTORY=$tmp/nstat
gcc -O2 -std=c11 -Wall -Wextra -Werror -o "$tmp/sdpbench" "$here/bench/sdpbench.c"

# pair MODE WRAP: runs one server and one client, each under WRAP (strace with its output file
# named after the role, or nothing).
pair() {
	local mode=$1 wrap=$2 port pre=() ws=() wc=()
	port=$(free_port)
	[[ $mode == sdp ]] && pre=(env "LD_PRELOAD=$LIBSDP_ROOT/build/libsdp.so" SDP_MODE=sdp)
	[[ -n $wrap ]] && ws=(strace -f -c -o "$tmp/strace.$mode.server") wc=(strace -f -c -o "$tmp/strace.$mode.client")
	timeout 300 "${pre[@]}" "${ws[@]}" "$tmp/sdpbench" server 127.0.0.1 "$port" >"$tmp/srv.$mode" 2>&1 &
	local srv=$!
	wait_listen "$srv" 20 "$port"
	timeout 300 "${pre[@]}" "${wc[@]}" "$tmp/sdpbench" client 127.0.0.1 "$port" "$test" "$size" \
		runs=1 iters="$iters" miniters="$iters" "${extra[@]}" >/dev/null
	wait "$srv"
}

# calls FILE: "N system calls per message: call=n ..." from strace -c's table.
calls() {
	awk -v n="$iters" '
		NR > 2 && $0 !~ /total|----/ { c[$NF] += $4 }
		END {
			app = ""; rt = ""; total = 0
			for (k in c) {
				if (c[k] < n / 10) continue
				if (k ~ /^(futex|nanosleep|epoll_pwait|sched_yield)$/)
					rt = rt sprintf(" %s=%.2f", k, c[k] / n)
				else {
					app = app sprintf(" %s=%.2f", k, c[k] / n); total += c[k] / n
				}
			}
			printf "%.2f system calls per message:%s", total, app
			if (rt != "") printf " (Go runtime:%s)", rt
		}' "$1"
}

echo "$test $size ${extra[*]}: $iters messages, 127.0.0.1"
for mode in tcp sdp; do
	nstat -n >/dev/null
	pair "$mode" ""
	segs=$(nstat TcpOutSegs 2>/dev/null | awk '$1 == "TcpOutSegs" { print $2 }')
	pair "$mode" strace
	printf '%s: %.2f TCP segments per message\n' "$mode" "$(awk -v s="${segs:-0}" -v n="$iters" 'BEGIN { print s / n }')"
	printf '%s client: %s\n' "$mode" "$(calls "$tmp/strace.$mode.client")"
	printf '%s server: %s\n' "$mode" "$(calls "$tmp/strace.$mode.server")"
done
