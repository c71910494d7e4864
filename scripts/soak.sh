#!/usr/bin/env bash
# The long soak: 100,000 connect / transfer / close cycles between a preloaded client and a
# preloaded epoll echo server (tests/reliability TestSoak), checking that neither process's
# descriptor count nor resident memory grows. Bounded to 10 minutes. `make test` runs the same
# test with 10,000 cycles. Environment: SOAK_CYCLES (default 100000).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

use_go
cd "$LIBSDP_ROOT"
[[ -f build/libsdp.so && -f build/libsdp-engine.so ]] || die "build/libsdp.so is missing: run make first"
cycles=${SOAK_CYCLES:-100000}
info "$cycles cycles (at most 10 minutes)"
RELIABILITY_SOAK_CYCLES=$cycles go test -count=1 -timeout 10m -run '^TestSoak$' -v ./tests/reliability/ |
	grep -E '^(=== RUN|--- |RELIABILITY|PASS|FAIL|ok|    soak_test)'
