#!/usr/bin/env bash
# The compatibility suite: real, unmodified programs over SDP. Each case runs three times:
#   sdp    both ends under LD_PRELOAD=build/libsdp.so: the connections must run over SDP
#   mixed  only one end preloaded: it must fall back to TCP and the workload still pass
#   plain  nothing preloaded: the same workload over kernel TCP, for the rate beside SDP's
# Every run checks the exit status, the data (checksums or the program's own verification)
# and libsdp's own evidence: the exit statistics line of each preloaded process (SDP_STATS=1)
# and, for servers, build/sdpstat sampled while the workload runs.
#
# Usage: tests/compat/run.sh [CASE...]   (default: every case; also COMPAT_CASES="a b")
# COMPAT_KEEP=1 keeps the run directories and logs; COMPAT_TABLE=FILE also writes the table
# there as Markdown. Exit status 1 when any run failed.
set -uo pipefail
# shellcheck disable=SC2034 # read by the cases

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../../scripts/lib.sh"
# shellcheck source=tests/compat/lib.sh
. "$here/lib.sh"
SCRIPT_NAME=compat
SDPSTAT=$LIBSDP_ROOT/build/sdpstat

require_build
[[ -x $SDPSTAT ]] || die "build/sdpstat is missing: run 'make' first"
[[ -z ${LD_PRELOAD:-} ]] || die "run the suite without LD_PRELOAD (it sets it per process)"

UNSUPPORTED=() # "case|program|why it cannot run over SDP", filled by the cases
ALL_CASES=(http iperf3 socat redis memcached nginx haproxy postgres sshd netpipe sockperf node node22 node24 mpich java)
for f in "$here"/cases/*.sh; do
	# shellcheck source=/dev/null
	. "$f"
done

if (($# > 0)); then
	CASES=("$@")
elif [[ -n ${COMPAT_CASES:-} ]]; then
	read -r -a CASES <<<"$COMPAT_CASES"
else
	CASES=("${ALL_CASES[@]}")
fi

WORK=$(mktemp -d /tmp/libsdp-compat.XXXXXX)
chmod 755 "$WORK" # servers that drop privileges (nginx, postgres) read and write below it
cleanup() {
	sdpstat_stop
	kill_groups
	if [[ ${COMPAT_KEEP:-0} == 1 ]]; then
		info "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Shared payloads, readable by every user.
mkdir -p "$WORK/data"
head -c $((100 * 1024 * 1024)) /dev/urandom >"$WORK/data/100M.bin"
head -c $((32 * 1024 * 1024)) "$WORK/data/100M.bin" >"$WORK/data/32M.bin"
SHA100=$(sha "$WORK/data/100M.bin")
SHA32=$(sha "$WORK/data/32M.bin")
chmod -R a+rX "$WORK/data"

declare -A RESULT RATES UNITS SEENS VERSIONS
TOTAL_FAILS=0
start=$SECONDS
for c in "${CASES[@]}"; do
	declare -F "${c}_run" >/dev/null || die "no case named $c"
	VERSIONS[$c]=$("${c}_version" 2>/dev/null | head -n 1)
	info "$c (${VERSIONS[$c]})"
	for m in sdp mixed plain; do
		run_mode "$c" "$m"
	done
done
elapsed=$((SECONDS - start))

ratio() {
	awk -v a="$1" -v b="$2" -v lower="$3" 'BEGIN {
		if (a == "" || b == "" || a + 0 <= 0 || b + 0 <= 0) { print "-"; exit }
		printf "%.2f", lower ? b / a : a / b }'
}

# The table, as Markdown (it goes into docs/COMPATIBILITY.md as it is).
table() {
	echo "| program | version | both preloaded | one end preloaded | transport seen (both / one end) | SDP | plain TCP | SDP / TCP |"
	echo "|---|---|---|---|---|---|---|---|"
	local c unit lower
	for c in "${CASES[@]}"; do
		unit=${UNITS[$c]:-}
		lower=0
		[[ $unit == *µs* || $unit == *" s"* ]] && lower=1
		printf '| %s | %s | %s | %s (%s) | %s / %s | %s | %s | %s |\n' \
			"$(case_var "$c" LABEL "$c")" "${VERSIONS[$c]}" \
			"${RESULT[$c.sdp]:-not run}" "${RESULT[$c.mixed]:-not run}" \
			"$(case_var "$c" MIXED "server")" \
			"${SEENS[$c.sdp]:-}" "${SEENS[$c.mixed]:-}" \
			"${RATES[$c.sdp]:+${RATES[$c.sdp]} $unit}" "${RATES[$c.plain]:+${RATES[$c.plain]} $unit}" \
			"$(ratio "${RATES[$c.sdp]:-}" "${RATES[$c.plain]:-}" "$lower")"
	done
	local u rest
	for u in "${UNSUPPORTED[@]}"; do
		[[ " ${CASES[*]} " == *" ${u%%|*} "* ]] || continue
		rest=${u#*|}
		printf '| %s | - | cannot work | cannot work | %s | - | - | - |\n' "${rest%%|*}" "${rest#*|}"
	done
}

echo
echo "libsdp compatibility, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, ${elapsed}s"
table
if [[ -n ${COMPAT_TABLE:-} ]]; then
	table >"$COMPAT_TABLE"
fi
echo
if ((TOTAL_FAILS > 0)); then
	info "FAILED: $TOTAL_FAILS run(s)"
	exit 1
fi
info "PASSED: ${#CASES[@]} case(s), 3 runs each, in ${elapsed}s"
