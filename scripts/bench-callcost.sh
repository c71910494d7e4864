#!/usr/bin/env bash
# What a call from the application into the engine costs, with the runtime line that
# scripts/go-overlay.sh replaces and without: build/libsdp-engine.so (the overlay) beside an
# engine built here from the runtime as it is, ROUNDS rounds in turn, one thread and two at once
# (ns per call per thread, wall time; scripts/bench/callcost.c).
#
#   bash scripts/bench-callcost.sh [ROUNDS=5]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"
require_build
require_cmd gcc go
rounds=${1:-5}
tmp=$(mktemp -d /tmp/libsdp-callcost.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -o "$tmp/callcost" "$here/bench/callcost.c" -ldl -lpthread
(cd "$LIBSDP_ROOT" && go build -buildmode=c-shared -ldflags='-X=runtime.godebugDefault=asyncpreemptoff=1' \
	-o "$tmp/plain-engine.so" ./preload)
printf '%-6s %-26s %-26s\n' round "overlay: 1 thread, 2" "runtime as it is: 1, 2"
for r in $(seq 1 "$rounds"); do
	o1=$("$tmp/callcost" "$LIBSDP_ENGINE" 1 2000000) o2=$("$tmp/callcost" "$LIBSDP_ENGINE" 2 2000000)
	p1=$("$tmp/callcost" "$tmp/plain-engine.so" 1 2000000) p2=$("$tmp/callcost" "$tmp/plain-engine.so" 2 2000000)
	printf '%-6s %-26s %-26s\n' "$r" "$o1 ns, $o2 ns" "$p1 ns, $p2 ns"
done
