#!/usr/bin/env bash
# System calls per message of a 1-byte ping-pong (sdpbench lat), plain TCP and under libsdp
# (SDP_MODE=sdp at both ends), on 127.0.0.1: the client runs under `strace -f -c`, and each
# call it made more than ITERS/10 times is printed per round trip (a send and a receive).
# The engine's Go runtime adds its own (futex, nanosleep, epoll_pwait), printed apart.
#
#   bash scripts/bench-syscalls.sh            (SYSCALL_ITERS=6000 by default)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

require_cmd gcc strace timeout
require_build
iters=${SYSCALL_ITERS:-6000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -std=c11 -Wall -Wextra -Werror -o "$tmp/sdpbench" "$here/bench/sdpbench.c"

# count MODE: runs one case and prints "MODE: call=N/message ...".
count() {
	local mode=$1 port pre=()
	port=$(free_port)
	[[ $mode == sdp ]] && pre=(env "LD_PRELOAD=$LIBSDP_ROOT/build/libsdp.so" SDP_MODE=sdp)
	"${pre[@]}" "$tmp/sdpbench" server 127.0.0.1 "$port" >"$tmp/srv.$mode" 2>&1 &
	local srv=$!
	wait_listen "$srv" 20 "$port"
	timeout 120 "${pre[@]}" strace -f -c -o "$tmp/strace.$mode" \
		"$tmp/sdpbench" client 127.0.0.1 "$port" lat 1 runs=1 iters="$iters" >/dev/null
	wait "$srv"
	awk -v n="$iters" -v mode="$mode" '
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
			printf "%s: %.2f system calls per round trip:%s", mode, total, app
			if (rt != "") printf " (Go runtime:%s)", rt
			printf "\n"
		}' "$tmp/strace.$mode"
}
count tcp
count sdp
