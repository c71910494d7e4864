#!/usr/bin/env bash
# The benchmark suite: the micro-benchmarks of the papers libsdp's design comes from (listed
# in scripts/bench/sdpbench.c) over plain TCP and over libsdp in
# its configurations, on 127.0.0.1 and between two network namespaces joined by veth, plus
# NetPIPE and sockperf as third-party cross-checks, the cost of the preload for programs
# without networking, and a profile. Writes raw outputs, CSV, PNG plots and a Markdown
# summary into a results folder (git-ignored); `make bench` runs it.
#
#   BENCH_QUICK=1      a few sizes, fewer runs and iterations (a minute or two)
#   BENCH_OUT=DIR      results folder (default results/bench-YYYYmmdd-HHMMSS)
#   BENCH_NETS="lo veth"   where to run (lo: 127.0.0.1; veth: two namespaces)
#   BENCH_SECTIONS="latbw progress util overlap markers stream cpu preload thirdparty profile"
#   BENCH_BUDGET=S     seconds the measured runs of one case may take (iterations are
#                      reduced to fit, never below 10 per run; the CSV has both counts)
#
# Every configuration is a set of environment variables. Each run records what the engine
# says it did (SDP_STATS=1 exit lines and SDP_LOG_LEVEL=info connection lines), so a knob
# the engine does not know shows up in the CSV instead of silently measuring the default.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

require_build
require_cmd gcc ip timeout

quick=${BENCH_QUICK:-0}
out=${BENCH_OUT:-$LIBSDP_ROOT/results/bench-$(date -u +%Y%m%d-%H%M%S)}
nets=${BENCH_NETS:-lo veth}
sections=${BENCH_SECTIONS:-latbw progress util overlap markers stream cpu preload thirdparty profile}
mkdir -p "$out/raw" "$out/lib" "$out/bin"
out=$(cd "$out" && pwd)

# A private copy of the libraries: a rebuild of build/ during the run changes nothing here.
cp "$LIBSDP_SO" "$LIBSDP_ENGINE" "$out/lib/"
SHIM=$out/lib/libsdp.so
gcc -O2 -std=c11 -Wall -Wextra -Werror -o "$out/bin/sdpbench" "$here/bench/sdpbench.c"
BENCH=$out/bin/sdpbench

if ((quick)); then
	SIZES_ALL=1,64,1024,16384,65536,1048576
	SIZES_SMALL=64,256,1024,4096
	SIZES_POW4=$SIZES_ALL
	RUNS=4
	ITERS=1000
	BUDGET=${BENCH_BUDGET:-0.3}
	COMPUTE_PROGRESS=0,1000
	COMPUTE_WAIT=0,1000
	COMPUTE_BW=0,128
	UTIL_SIZES=256,4096,65536
else
	SIZES_ALL=$(
		s=1 l=
		while ((s <= 4194304)); do
			l+=${l:+,}$s
			s=$((s * 2))
		done
		echo "$l"
	)
	SIZES_SMALL=64,128,256,512,1024,2048,4096
	SIZES_POW4=1,4,16,64,256,1024,4096,16384,65536,262144,1048576,4194304
	RUNS=10
	ITERS=10000
	BUDGET=${BENCH_BUDGET:-0.4}
	COMPUTE_PROGRESS=0,500,1000,2000
	COMPUTE_WAIT=0,100,1000,10000
	COMPUTE_BW=0,8,32,128,512
	UTIL_SIZES=64,256,1024,4096,16384,65536
fi
COMMON=(runs=$RUNS budget=$BUDGET miniters=5)
HUGE=1073741824 # an SDP_ZCOPY_THRESHOLD no message reaches: BCopy only
PAPERS_ZC=SDP_ZCOPY_THRESHOLD=32768 # the papers' zero copy from 32 KiB (the default is none)

# Configurations: name → environment. "tcp" runs without the preload.
declare -A CFG=(
	[tcp]=""
	[sdp-default]=""
	[sdp-iwarp]="SDP_SHM=0" # on 127.0.0.1: iWARP over loopback TCP instead of shared memory
	[basic]="SDP_BUFFERING=separate SDP_FLOW_CONTROL=credit $PAPERS_ZC"
	[enhanced]="SDP_BUFFERING=integrated SDP_FLOW_CONTROL=transport $PAPERS_ZC"
	[enhanced-bcopy]="SDP_BUFFERING=integrated SDP_FLOW_CONTROL=transport SDP_ZCOPY_THRESHOLD=$HUGE"
	[enhanced-nomarkers]="SDP_BUFFERING=integrated SDP_FLOW_CONTROL=transport SDP_MARKERS=0 $PAPERS_ZC"
	[enhanced-nocrc]="SDP_BUFFERING=integrated SDP_FLOW_CONTROL=transport SDP_CRC=0 $PAPERS_ZC"
	[enhanced-bare]="SDP_BUFFERING=integrated SDP_FLOW_CONTROL=transport SDP_MARKERS=0 SDP_CRC=0 $PAPERS_ZC"
	[inline]="SDP_PROGRESS=inline"
	[async]="SDP_PROGRESS=async"
	[copy]="SDP_BUFFERING=separate SDP_ZCOPY_THRESHOLD=$HUGE"
	[inplace]="SDP_BUFFERING=integrated SDP_ZCOPY_THRESHOLD=$HUGE"
	[gather]="SDP_BUFFERING=integrated SDP_ZCOPY_THRESHOLD=4096"
)
for fc in credit rdma nic transport; do
	CFG[$fc]="SDP_FLOW_CONTROL=$fc"
	for pr in inline async; do
		CFG[$fc-$pr]="SDP_FLOW_CONTROL=$fc SDP_PROGRESS=$pr"
	done
	for b in 64 256; do
		CFG[$fc-buf${b}k]="SDP_FLOW_CONTROL=$fc SDP_BUF_SIZE=$((b * 1024 / 8)) SDP_RECV_BUFS=8"
	done
done
for sp in 512 1024 2048 4096 16384; do
	CFG[spacing-$sp]="SDP_MARKER_SPACING=$sp"
done
CFG[spacing-none]="SDP_MARKERS=0"

# ---- where the two ends run ----

veth_names sdpbench 231
server_pid=

cleanup() {
	if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill -KILL "$server_pid" 2>/dev/null || true
	fi
	veth_down
}
trap cleanup EXIT

# net_setup NET sets SRV_ADDR, the prefixes that run a command at each end, and a port.
net_setup() {
	case $1 in
	lo)
		SRV_ADDR=127.0.0.1
		AT_SRV=()
		AT_CLI=()
		;;
	veth)
		veth_up
		SRV_ADDR=$ADDR_A
		AT_SRV=(ip netns exec "$NS_A")
		AT_CLI=(ip netns exec "$NS_B")
		;;
	*) die "unknown network $1 (lo, veth)" ;;
	esac
}

# next_port sets PORT to a port for the next server (and its SDP port above it).
PORT_SEQ=30000
next_port() {
	if [[ $NET == lo ]]; then
		PORT=$(free_port)
	else
		PORT_SEQ=$((PORT_SEQ + 1))
		PORT=$PORT_SEQ
	fi
}

# cfg_env NAME DIR prints the environment of configuration NAME, logging into DIR.
cfg_env() {
	[[ -v CFG[$1] ]] || die "unknown configuration $1"
	if [[ $1 == tcp ]]; then
		echo "SDP_STATS=0"
		return
	fi
	# debug: the engine's start line lists the settings it took; there is no per-I/O logging
	echo "LD_PRELOAD=$SHIM SDP_MODE=sdp SDP_STATS=1 SDP_LOG_LEVEL=debug SDP_LOG_FILE=$2/%p.log ${CFG[$1]}"
}

# run_pair SECTION CONFIG PREFIX_CMD... -- CLIENT_ARGS...: one server and one client in
# configuration CONFIG; the client's lines go to the case directory.
CASE_N=0
run_pair() {
	local section=$1 cfg=$2
	shift 2
	local wrap=()
	while [[ $1 != -- ]]; do
		wrap+=("$1")
		shift
	done
	shift
	CASE_N=$((CASE_N + 1))
	local dir=$out/raw/$(printf '%04d' $CASE_N)-$section-$NET-$cfg
	mkdir -p "$dir"
	next_port
	local port=$PORT
	local -a envv
	read -r -a envv <<<"$(cfg_env "$cfg" "$dir")"
	{
		echo "section=$section"
		echo "net=$NET"
		echo "config=$cfg"
		echo "env=${CFG[$cfg]}"
		echo "client_args=$*"
	} >"$dir/meta"
	"${AT_SRV[@]}" env -u LD_PRELOAD "${envv[@]}" SDPBENCH_TIMEOUT=900 \
		"${wrap[@]/@/$dir/server}" "$BENCH" server "$SRV_ADDR" "$port" >"$dir/server.out" 2>"$dir/server.err" &
	server_pid=$!
	local deadline=$((SECONDS + 15))
	until grep -q ready "$dir/server.out" 2>/dev/null; do
		kill -0 "$server_pid" 2>/dev/null || {
			warn "server of $dir exited: $(cat "$dir/server.err")"
			return 0
		}
		((SECONDS < deadline)) || {
			warn "server of $dir not ready after 15s"
			kill -KILL "$server_pid"
			return 0
		}
		sleep 0.02
	done
	local rc=0
	"${AT_CLI[@]}" env -u LD_PRELOAD "${envv[@]}" SDPBENCH_TIMEOUT=900 timeout -k 5 900 \
		"${wrap[@]/@/$dir/client}" "$BENCH" client "$SRV_ADDR" "$port" "$@" >"$dir/client.out" 2>"$dir/client.err" || rc=$?
	local i
	for i in $(seq 1 200); do
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$server_pid" 2>/dev/null; then
		kill -KILL "$server_pid" 2>/dev/null || true
		echo "server killed" >>"$dir/server.err"
	fi
	wait "$server_pid" 2>/dev/null || true
	server_pid=
	echo "rc=$rc" >>"$dir/meta"
	if ((rc)); then
		warn "$section $NET $cfg: client failed (rc=$rc): $(tail -n 2 "$dir/client.err")"
	fi
	printf '%s %-5s %-22s %s\n' "$(date -u +%H:%M:%S)" "$NET" "$cfg" "$section $(wc -l <"$dir/client.out") cases"
}

# ---- sections ----

sec_latbw() {
	# every power of two for TCP and the main configurations; every power of four for
	# the variants (BCopy only, markers and CRC off); 1 B latency always gets all its
	# iterations (full=1: no budget for sizes up to 1 byte)
	local cfgs=(tcp sdp-default sdp-iwarp basic enhanced) more=(enhanced-bcopy enhanced-nomarkers enhanced-nocrc enhanced-bare)
	# on 127.0.0.1 only: the variants, and iWARP beside the default's shared memory (between
	# two namespaces the default is iWARP)
	[[ $NET == veth ]] && more=() cfgs=(tcp sdp-default basic enhanced)
	local c
	for c in "${cfgs[@]}"; do
		run_pair lat "$c" -- lat "$SIZES_ALL" iters="$ITERS" bytes=8388608 full=1 "${COMMON[@]}"
		run_pair bw "$c" -- bw "$SIZES_ALL" iters="$ITERS" bytes=33554432 "${COMMON[@]}"
	done
	for c in "${more[@]}"; do
		run_pair lat "$c" -- lat "$SIZES_POW4" iters="$ITERS" bytes=8388608 "${COMMON[@]}"
		run_pair bw "$c" -- bw "$SIZES_POW4" iters="$ITERS" bytes=33554432 "${COMMON[@]}"
	done
}

sec_progress() {
	local c cfgs=(tcp)
	for c in credit rdma nic transport; do
		cfgs+=("$c-inline" "$c-async")
	done
	for c in "${cfgs[@]}"; do
		run_pair progress "$c" -- progress 4096 burst=100 iters=200 nodelay=1 compute="$COMPUTE_PROGRESS" "${COMMON[@]}"
	done
}

sec_util() {
	local c b
	for b in 64 256; do
		for c in credit rdma nic transport; do
			run_pair "util${b}k" "$c-buf${b}k" -- util "$UTIL_SIZES" iters=2000 bytes=67108864 \
				compute=20 capacity=$((b * 1024)) "${COMMON[@]}"
		done
	done
}

sec_overlap() {
	local c cfgs=(tcp inline async)
	for c in "${cfgs[@]}"; do
		run_pair wait "$c" -- wait 4096,65536,262144,1048576 iters=200 nodelay=1 compute="$COMPUTE_WAIT" "${COMMON[@]}"
		[[ $NET == lo ]] && run_pair bwcompute "$c" -- bw 4096,131072 iters=2000 bytes=67108864 \
			nodelay=1 compute="$COMPUTE_BW" "${COMMON[@]}"
	done
	return 0
}

sec_markers() {
	local c
	for c in spacing-512 spacing-1024 spacing-2048 spacing-4096 spacing-16384 spacing-none; do
		run_pair spacing "$c" -- bw 16384,65536,1048576 iters="$ITERS" bytes=33554432 "${COMMON[@]}"
	done
	for c in copy inplace gather; do
		run_pair strategy "$c" -- bw 16384,65536,1048576 iters="$ITERS" bytes=33554432 "${COMMON[@]}"
	done
	# the framing step alone, in the engine's own benchmark (same run)
	use_go
	(cd "$LIBSDP_ROOT" && nice go test -run '^$' -bench 'EncodeStrategy' -benchtime "$([[ $quick == 1 ]] && echo 50ms || echo 300ms)" \
		./iwarp/) >"$out/raw/encode-strategy.txt" 2>&1 || warn "go test -bench EncodeStrategy failed"
}

sec_stream() {
	local c
	for c in tcp credit rdma nic transport; do
		run_pair stream "$c" -- bw "$SIZES_SMALL" iters="$ITERS" nodelay=1 "${COMMON[@]}"
	done
}

PERF_CACHE=0
perf_probe() {
	local o
	o=$(perf stat -x, -e cache-misses,cache-references true 2>&1 || true)
	if [[ $o == *"<not supported>"* || $o == *"not supported"* || -z $o ]]; then
		PERF_CACHE=0
		echo "perf stat: hardware cache events are not supported on this machine ($(echo "$o" | head -n 1))" >"$out/raw/perf-cache.txt"
	else
		PERF_CACHE=1
		echo "perf stat: cache-misses supported" >"$out/raw/perf-cache.txt"
	fi
}

sec_cpu() {
	local c s wrap=()
	((PERF_CACHE)) && wrap=(perf stat -x, -e cache-misses,cache-references -o @.perf --)
	# CPU per GB of every configuration is also in the bandwidth sweep's rows
	for c in tcp sdp-default sdp-iwarp basic enhanced enhanced-bcopy enhanced-bare rdma nic; do
		for s in 4096 65536 1048576; do
			run_pair cpu "$c" "${wrap[@]}" -- bw "$s" iters="$ITERS" bytes=67108864 "${COMMON[@]}"
		done
	done
}

sec_preload() {
	RUNS=$([[ $quick == 1 ]] && echo 50 || echo 200) ITERATIONS=$([[ $quick == 1 ]] && echo 50000 || echo 200000) \
		bash "$here/bench-preload.sh" >"$out/raw/preload.txt" 2>&1 || warn "bench-preload.sh failed"
}

# third-party programs: NetPIPE (NPtcp) and sockperf, plain and preloaded
sec_thirdparty() {
	local c port dir cfgs=(tcp sdp-default sdp-iwarp)
	[[ $NET == veth ]] && cfgs=(tcp sdp-default) # iWARP is the default there
	for c in "${cfgs[@]}"; do
		dir=$out/raw/nptcp-$NET-$c
		mkdir -p "$dir"
		next_port
		port=$PORT
		local -a envv
		read -r -a envv <<<"$(cfg_env "$c" "$dir")"
		local upper=$([[ $quick == 1 ]] && echo 65536 || echo 4194304)
		(cd "$dir" && "${AT_SRV[@]}" env -u LD_PRELOAD "${envv[@]}" timeout -k 5 300 NPtcp -P "$port" -p 0 -u "$upper" \
			>"$dir/receiver.out" 2>&1) &
		local rpid=$!
		sleep 0.5
		(cd "$dir" && "${AT_CLI[@]}" env -u LD_PRELOAD "${envv[@]}" timeout -k 5 300 NPtcp -h "$SRV_ADDR" -P "$port" -p 0 \
			-u "$upper" -o "$dir/np.out" >"$dir/transmitter.out" 2>&1) || warn "NPtcp $NET $c failed"
		wait "$rpid" 2>/dev/null || true
		echo "$(date -u +%H:%M:%S) $NET $c NPtcp done"

		dir=$out/raw/sockperf-$NET-$c
		mkdir -p "$dir"
		next_port
		port=$PORT
		read -r -a envv <<<"$(cfg_env "$c" "$dir")"
		"${AT_SRV[@]}" env -u LD_PRELOAD "${envv[@]}" timeout -k 5 120 sockperf sr --tcp -i "$SRV_ADDR" -p "$port" \
			>"$dir/server.out" 2>&1 &
		local spid=$!
		sleep 0.5
		local secs=$([[ $quick == 1 ]] && echo 1 || echo 2) m
		for m in 64 1024; do
			"${AT_CLI[@]}" env -u LD_PRELOAD "${envv[@]}" timeout -k 5 60 sockperf pp --tcp -i "$SRV_ADDR" -p "$port" \
				-m "$m" -t "$secs" >"$dir/pp-$m.out" 2>&1 || warn "sockperf pp $NET $c failed"
			"${AT_CLI[@]}" env -u LD_PRELOAD "${envv[@]}" timeout -k 5 60 sockperf tp --tcp -i "$SRV_ADDR" -p "$port" \
				-m "$m" -t "$secs" >"$dir/tp-$m.out" 2>&1 || warn "sockperf tp $NET $c failed"
		done
		kill -INT "$spid" 2>/dev/null || true
		wait "$spid" 2>/dev/null || true
		echo "$(date -u +%H:%M:%S) $NET $c sockperf done"
	done
}

# where the time goes: perf record with a software clock (no hardware counters needed)
sec_profile() {
	local c
	for c in sdp-default; do
		run_pair profile-bw64k "$c" perf record -q -e cpu-clock -g -o @.perf.data -- \
			bw 65536 iters=2000 bytes=268435456 runs=3
		[[ $NET == lo ]] || continue
		run_pair profile-lat1 "$c" perf record -q -e cpu-clock -g -o @.perf.data -- \
			lat 1 iters=20000 runs=3
		run_pair profile-stream256 "$c" perf record -q -e cpu-clock -g -o @.perf.data -- \
			bw 256 iters=50000 nodelay=1 runs=3
	done
	local d
	for d in "$out"/raw/*-profile-*-"$NET"-*; do
		for side in client server; do
			[[ -f $d/$side.perf.data ]] || continue
			perf report -i "$d/$side.perf.data" --stdio --no-children --sort dso,sym --percent-limit 1 \
				>"$d/$side.report.txt" 2>/dev/null || true
			perf report -i "$d/$side.perf.data" --stdio --no-children --sort dso,sym -g none --percent-limit 0.2 \
				>"$d/$side.flat.txt" 2>/dev/null || true
		done
	done
}

# ---- run ----

{
	echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "nproc=$(nproc)"
	echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
	echo "kernel=$(uname -r)"
	echo "commit=${BENCH_COMMIT:-$(git -C "$LIBSDP_ROOT" describe --always --dirty 2>/dev/null || echo unknown)}"
	echo "quick=$quick"
	echo "command=${BENCH_COMMAND:-bash scripts/bench.sh}"
	echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"

perf_probe
start=$SECONDS
for NET in $nets; do
	net_setup "$NET"
	for s in $sections; do
		case $s in
		preload | markers | cpu | util)
			[[ $NET == lo ]] || continue
			;;
		esac
		info "$NET: $s"
		"sec_$s"
	done
done
veth_down
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
echo "elapsed_s=$((SECONDS - start))" >>"$out/machine.txt"

"$PYTHON" "$here/bench/report.py" "$out"
info "results in $out (elapsed $((SECONDS - start)) s)"
