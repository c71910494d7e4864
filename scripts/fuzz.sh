#!/usr/bin/env bash
# Runs every Go fuzz target of the module (each `func FuzzXxx(f *testing.F)` in a _test.go file),
# one after another, for FUZZTIME each (default 10s). Fails if any target fails; a failing input
# is kept by Go under the package's testdata/fuzz/FuzzXxx/ so that `go test` replays it.
# Environment: FUZZTIME (go test -fuzztime syntax: 10s, 2m, 1000x), FUZZ_TIMEOUT (seconds per
# target, compiling included; default 900).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

use_go
cd "$LIBSDP_ROOT"
fuzztime=${FUZZTIME:-10s}
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

passed=0
failed=()
for t in "${targets[@]}"; do
	dir=${t% *} name=${t#* }
	info "$dir $name"
	if timeout --kill-after=10 "$limit" \
		go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$dir/"; then
		passed=$((passed + 1))
	else
		failed+=("$dir $name")
	fi
done

for t in "${failed[@]}"; do
	info "FAILED: $t"
done
echo "fuzz: $passed passed, ${#failed[@]} failed"
((${#failed[@]} == 0))
