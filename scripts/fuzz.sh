#!/usr/bin/env bash
# Runs every Go fuzz target of the module (each `func FuzzXxx(f *testing.F)` in a _test.go file),
# one after another, for FUZZTIME each (default 10s). Fails if any target fails; a failing input
# is kept by Go under the package's testdata/fuzz/FuzzXxx/ so that `go test` replays it.
# Environment: FUZZTIME (go test -fuzztime syntax: 10s, 2m, 1000x), FUZZ_TIMEOUT (seconds per
# target, compiling included; default 900), FUZZMINIMIZETIME (go test -fuzzminimizetime; default
# 2s).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

use_go
cd "$LIBSDP_ROOT"
fuzztime=${FUZZTIME:-10s}
# Go minimizes every input that finds new coverage, for up to a minute by default, and counts
# no executions meanwhile: FuzzSink, whose seeds are 79 KB of FPDUs, ran 16,195 inputs in 60 s
# (0 a second for the last 35) and 297,000 in 45 s with 1 s of minimizing. A failing input is
# still written, minimized as far as this allows.
minimize=${FUZZMINIMIZETIME:-2s}
limit=${FUZZ_TIMEOUT:-900}

# "dir name" for each fuzz target, in a stable order.
mapfile -t targets < <(
	find . -path ./build -prune -o -path './.*' -prune -o -name '*_test.go' -print |
		sort |
		while read -r f; do
			{ grep -oE '^func Fuzz[A-Za-z0-9_]*\(' "$f" || true; } |
				sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(/\1/' |
				while read -r name; do
					echo "$(dirname "$f") $name"
				done
		done
)

if ((${#targets[@]} == 0)); then
	info "no fuzz targets found"
	exit 0
fi
info "${#targets[@]} fuzz targets, $fuzztime each"

# fuzz_once runs one target, its output also kept in $out.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fuzz_once() {
	timeout --kill-after=10 "$limit" \
		go test -run='^$' -fuzz="^$2\$" -fuzztime="$fuzztime" -fuzzminimizetime="$minimize" "$1/" 2>&1 | tee "$out"
	return "${PIPESTATUS[0]}"
}

passed=0
failed=()
for t in "${targets[@]}"; do
	dir=${t% *} name=${t#* }
	info "$dir $name"
	if fuzz_once "$dir" "$name"; then
		passed=$((passed + 1))
		continue
	fi
	# Go's fuzzer sometimes ends a run whose time is up with "context deadline exceeded"
	# although no input failed (nothing is written to testdata). That run is repeated once;
	# a real failure names its input and fails again.
	if grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
		info "$dir $name: the fuzzer stopped late without a failing input; running it again"
		if fuzz_once "$dir" "$name"; then
			passed=$((passed + 1))
			continue
		fi
	fi
	failed+=("$dir $name")
done

for t in "${failed[@]}"; do
	info "FAILED: $t"
done
echo "fuzz: $passed passed, ${#failed[@]} failed"
((${#failed[@]} == 0))
