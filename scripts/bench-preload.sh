#!/usr/bin/env bash
# The cost of libsdp for programs that do no SDP: fork+exec of /bin/true with
# and without LD_PRELOAD (median of RUNS, interleaved), and a write+read of one
# byte on a pipe through the shim's hooks beside libc's own functions.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shim=$top/build/libsdp.so
[[ -f $shim ]] || { echo "bench-preload: $shim missing: run make first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -o "$out/preload_cost" "$top/scripts/bench/preload_cost.c" -ldl
echo "machine: $(nproc) cores, $(uname -r), $(date -u +%Y-%m-%d)"
"$out/preload_cost" exec "$shim" "${RUNS:-200}"
LD_PRELOAD=$shim "$out/preload_cost" pipe "${ITERATIONS:-200000}"
