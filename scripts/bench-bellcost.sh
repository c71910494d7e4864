#!/usr/bin/env bash
# What a doorbell costs: two processes waking each other through poll(), with a one-octet send
# on a loopback TCP connection (libsdp's shared-memory doorbell, which makes the application's
# own socket readable) and with an eventfd write, ROUNDS rounds in turn (scripts/bench/bellcost.c).
#
#   bash scripts/bench-bellcost.sh [ROUNDS=3] [WAKES=100000]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"
require_cmd gcc
rounds=${1:-3} wakes=${2:-100000}
tmp=$(mktemp -d /tmp/libsdp-bellcost.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -Wall -Wextra -Werror -o "$tmp/bellcost" "$here/bench/bellcost.c"
for r in $(seq 1 "$rounds"); do
	info "round $r"
	"$tmp/bellcost" tcp "$wakes"
	"$tmp/bellcost" eventfd "$wakes"
done
