#!/usr/bin/env bash
# Third-party tools, plain TCP and libsdp (both ends preloaded, default configuration) in one
# run, on 127.0.0.1 and between two network namespaces joined by a veth pair that this script
# creates and removes: the cases the iWARP/TCP path is held to.
#   - iperf3, default and -l 16K: bandwidth (Mbit/s, receiver);
#   - sockperf throughput, 64 B and 1 KiB: messages/s;
#   - sockperf ping-pong, 64 B: the median latency (µs; lower is better);
#   - NPtcp, 64 KiB to 4 MiB: the lowest and the median of libsdp's ratio over the sizes, and
#     the geometric mean of each one's rate over the sizes (TCP's own varies by size and run);
#   - ab -n 5000 -c 8 without keep-alive against nginx (2 workers, a 4 KiB page): requests/s,
#     which is mostly connection set-up, the CPU the nginx workers spent per request, and the
#     system calls they made per request (perf stat, where it can count them).
# Each case runs TOOLS_RUNS times (default 2), TCP and libsdp alternating; one line per run
# with the ratio libsdp/TCP (for latency, TCP's latency over libsdp's: above 1 is better).
# libsdp runs over iWARP (iwarp: SDP_SHM=0) and with shared memory between the two ends
# (shm: SDP_SHM=1, the default, which only two processes of one network namespace take; over
# veth it is iWARP again).
#
#   bash scripts/bench-tools.sh      (sockperf and NPtcp: bash scripts/install-bench-deps.sh)
#   TOOLS_NETS="veth"   TOOLS_RUNS=3   TOOLS_SECONDS=4   TOOLS_CFGS="iwarp shm"
#   TOOLS_CASES="iperf sockperf np ab"   TOOLS_IPERF_LENS="64K 100K" (more iperf3 write sizes)
#   TOOLS_SDP_ENV="SDP_SHORT_TCP=0" (more settings for both preloaded ends)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

require_build
require_cmd ip iperf3 sockperf NPtcp ab timeout awk
PATH=$PATH:/usr/sbin:/sbin require_cmd nginx
nets=${TOOLS_NETS:-lo veth}
cases=" ${TOOLS_CASES:-iperf sockperf np ab} "
runs=${TOOLS_RUNS:-2}
cfgs=${TOOLS_CFGS:-iwarp shm}
secs=${TOOLS_SECONDS:-4}
lens=${TOOLS_IPERF_LENS:-} # more iperf3 write sizes (-l), a line each
tmp=$(mktemp -d)
veth_names sdptools 233
pids=()
cleanup() {
	stop_servers
	veth_down
	rm -rf "$tmp"
}
trap cleanup EXIT

# place NET: srv and cli (command prefixes) and addr for NET.
place() {
	srv=() cli=() addr=127.0.0.1
	if [[ $1 == veth ]]; then
		srv=(ip netns exec "$NS_A") cli=(ip netns exec "$NS_B") addr=$ADDR_A
	fi
}

# envof CFG: the environment of both ends (none for plain TCP); TOOLS_SDP_ENV is added to the
# preloaded ones (for one, SDP_SHORT_TCP=0: ab's connections over SDP every one).
envof() {
	[[ $1 == iwarp ]] && echo "LD_PRELOAD=$LIBSDP_SO SDP_ENGINE=$LIBSDP_ENGINE SDP_SHM=0 ${TOOLS_SDP_ENV:-}"
	[[ $1 == shm ]] && echo "LD_PRELOAD=$LIBSDP_SO SDP_ENGINE=$LIBSDP_ENGINE SDP_SHM=1 ${TOOLS_SDP_ENV:-}"
	return 0
}

# serve NET CFG PORT CMD...: starts a server and waits (bounded) until PORT listens.
serve() {
	local net=$1 cfg=$2 port=$3
	shift 3
	place "$net"
	# shellcheck disable=SC2046
	"${srv[@]}" env -u LD_PRELOAD $(envof "$cfg") "$@" >"$tmp/server.out" 2>&1 &
	pids+=($!)
	local i
	for i in $(seq 1 100); do
		"${srv[@]}" ss -ltn "sport = :$port" | grep -q LISTEN && return 0
		sleep 0.05
	done
	die "$* did not listen on $port: $(tail -n 3 "$tmp/server.out")"
}

stop_servers() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
}

# client NET CFG CMD...: runs a client (bounded) and prints its output.
client() {
	local net=$1 cfg=$2
	shift 2
	place "$net"
	# shellcheck disable=SC2046
	"${cli[@]}" env -u LD_PRELOAD $(envof "$cfg") timeout -k 5 120 "$@" 2>&1 || true
}

# port_for NET: a port free on 127.0.0.1 whose SDP port is free too (in a fresh namespace
# every port is free).
port_for() {
	if [[ $1 == veth ]]; then
		echo $((30000 + RANDOM % 20000))
	else
		free_port
	fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }'; }

iperf() {
	local net=$1 cfg=$2 port=$3
	shift 3
	client "$net" "$cfg" iperf3 -c "$addr" -p "$port" -t "$secs" -f m "$@" | awk '/receiver/ { print $7 }'
}

sp_tp() {
	client "$1" "$2" sockperf tp --tcp -i "$addr" -p "$3" -m "$4" -t "$secs" |
		sed -n 's/.*Message Rate is \([0-9]*\).*/\1/p'
}

sp_pp() {
	client "$1" "$2" sockperf pp --tcp -i "$addr" -p "$3" -m 64 -t "$secs" |
		sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p'
}

np() {
	local net=$1 cfg=$2 port=$3
	place "$net"
	rm -f "$tmp/np.$cfg"
	serve "$net" "$cfg" "$port" NPtcp -P "$port" -l 65536 -u 4194304
	# shellcheck disable=SC2046
	(cd "$tmp" && "${cli[@]}" env -u LD_PRELOAD $(envof "$cfg") timeout -k 5 180 \
		NPtcp -h "$addr" -P "$port" -l 65536 -u 4194304 -o "$tmp/np.$cfg" >/dev/null 2>&1) || true
	stop_servers
}

# web NET CFG PORT: nginx (2 workers, no access log) serving a 4 KiB page, and ab's requests/s
# over 5000 connections, 8 at a time, one request each; failed requests make it "-".
web() {
	local net=$1 cfg=$2 port=$3 d=$tmp/nginx.$cfg
	place "$net"
	mkdir -p "$d/www" "$d/tmp"
	head -c 3072 /dev/urandom | base64 -w 64 >"$d/www/index.html"
	chmod a+x "$tmp" && chmod -R a+rwX "$d"
	cat >"$d/nginx.conf" <<CONF
worker_processes 2;
user nobody nogroup;
pid $d/nginx.pid;
error_log $d/error.log;
events { use epoll; worker_connections 512; }
http {
	access_log off;
	client_body_temp_path $d/tmp/body;
	proxy_temp_path $d/tmp/proxy;
	fastcgi_temp_path $d/tmp/fastcgi;
	uwsgi_temp_path $d/tmp/uwsgi;
	scgi_temp_path $d/tmp/scgi;
	server { listen $addr:$port; root $d/www; }
}
CONF
	serve "$net" "$cfg" "$port" "$(PATH=$PATH:/usr/sbin command -v nginx)" -p "$d" -c "$d/nginx.conf" \
		-g 'daemon off; master_process on;'
	local workers t0 t1 rps sc=- ps=""
	workers=$(pgrep -P "${pids[-1]}" | paste -sd' ')
	t0=$(worker_ticks "$workers")
	# The workers' system calls, every thread (those started later too: perf stat's counters
	# are inherited), where perf can count them.
	if perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
		perf stat -x, -e raw_syscalls:sys_enter -p "${workers// /,}" -o "$tmp/ab.perf" >/dev/null 2>&1 &
		ps=$!
	fi
	rps=$(client "$net" "$cfg" ab -q -n 5000 -c 8 "http://$addr:$port/index.html" |
		awk '$1 == "Failed" && $3 > 0 { bad = 1 } $1 == "Non-2xx" { bad = 1 }
			$1 == "Requests" && $2 == "per" { rps = $4 } END { print (bad || rps == "") ? "-" : rps }')
	t1=$(worker_ticks "$workers")
	if [[ -n $ps ]]; then
		kill -INT "$ps" 2>/dev/null || true
		wait "$ps" 2>/dev/null || true
		sc=$(awk -F, '/raw_syscalls:sys_enter/ && $1 ~ /^[0-9]+$/ { printf "%.1f", $1 / 5000 }' "$tmp/ab.perf" 2>/dev/null)
	fi
	stop_servers
	# requests/s, the workers' CPU per request (µs, user and system, every thread) and their
	# system calls per request
	echo "$rps $(awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", t / hz * 1e6 / 5000 }') ${sc:--}"
}

# worker_ticks PID...: the user and system time the processes have used, in clock ticks.
worker_ticks() {
	local p sum=0
	for p in $1; do
		sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
	done
	echo "$sum"
}

info "TCP and libsdp, ${secs}s per tool run, $runs runs; ratios libsdp/TCP (latency: TCP/libsdp)"
for net in $nets; do
	[[ $net == veth ]] && veth_up
	place "$net" # addr, for the cases that name it before a helper has placed them
	for r in $(seq 1 "$runs"); do
		declare -A v=()
		for cfg in tcp $cfgs; do
			if [[ $cases == *" iperf "* ]]; then
				p1=$(port_for "$net")
				serve "$net" "$cfg" "$p1" iperf3 -s -p "$p1"
				v[$cfg.iperf]=$(iperf "$net" "$cfg" "$p1")
				v[$cfg.iperf16]=$(iperf "$net" "$cfg" "$p1" -l 16K)
				for l in $lens; do v[$cfg.iperf.$l]=$(iperf "$net" "$cfg" "$p1" -l "$l"); done
				stop_servers
			fi
			if [[ $cases == *" sockperf "* ]]; then
				p2=$(port_for "$net")
				serve "$net" "$cfg" "$p2" sockperf server --tcp -i "$addr" -p "$p2"
				v[$cfg.tp64]=$(sp_tp "$net" "$cfg" "$p2" 64)
				v[$cfg.tp1k]=$(sp_tp "$net" "$cfg" "$p2" 1024)
				v[$cfg.pp64]=$(sp_pp "$net" "$cfg" "$p2")
				stop_servers
			fi
			if [[ $cases == *" np "* ]]; then np "$net" "$cfg" "$(port_for "$net")"; fi
			if [[ $cases == *" ab "* ]]; then
				read -r v[$cfg.ab] v[$cfg.abcpu] v[$cfg.absc] < <(web "$net" "$cfg" "$(port_for "$net")")
			fi
		done
		for c in $cfgs; do
			[[ $cases == *" iperf "* ]] &&
				printf '%-4s %-5s run %d  iperf3 %s/%s Mbit/s = %s   iperf3 -l 16K %s/%s = %s\n' "$net" "$c" "$r" \
					"${v[$c.iperf]}" "${v[tcp.iperf]}" "$(ratio "${v[$c.iperf]}" "${v[tcp.iperf]}")" \
					"${v[$c.iperf16]}" "${v[tcp.iperf16]}" "$(ratio "${v[$c.iperf16]}" "${v[tcp.iperf16]}")"
			if [[ $cases == *" iperf "* ]]; then
				for l in $lens; do
					printf '%-4s %-5s run %d  iperf3 -l %s %s/%s Mbit/s = %s\n' "$net" "$c" "$r" "$l" \
						"${v[$c.iperf.$l]}" "${v[tcp.iperf.$l]}" "$(ratio "${v[$c.iperf.$l]}" "${v[tcp.iperf.$l]}")"
				done
			fi
			[[ $cases == *" sockperf "* ]] &&
				printf '%-4s %-5s run %d  sockperf tp 64 B %s/%s msg/s = %s   1 KiB %s/%s = %s   pp 64 B p50 %s/%s us = %s\n' \
					"$net" "$c" "$r" "${v[$c.tp64]}" "${v[tcp.tp64]}" "$(ratio "${v[$c.tp64]}" "${v[tcp.tp64]}")" \
					"${v[$c.tp1k]}" "${v[tcp.tp1k]}" "$(ratio "${v[$c.tp1k]}" "${v[tcp.tp1k]}")" \
					"${v[$c.pp64]}" "${v[tcp.pp64]}" "$(ratio "${v[tcp.pp64]}" "${v[$c.pp64]}")"
			if [[ $cases != *" np "* ]]; then
				:
			elif [[ -s $tmp/np.tcp && -s $tmp/np.$c ]]; then
				paste "$tmp/np.tcp" "$tmp/np.$c" | awk -v net="$net" -v c="$c" -v r="$r" '
					$2 > 0 { q[++n] = $5 / $2; lt += log($2); if ($5 > 0) ls += log($5); else zero = 1 }
					END {
						if (!n) { printf "%-4s %-5s run %d  NPtcp: no sizes\n", net, c, r; exit }
						for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (q[j] < q[i]) { t = q[i]; q[i] = q[j]; q[j] = t }
						printf "%-4s %-5s run %d  NPtcp 64 KiB-4 MiB, %d sizes: lowest %.2f, median %.2f; geometric mean %.0f/%.0f Mbit/s\n",
							net, c, r, n, q[1], q[int((n + 1) / 2)], zero ? 0 : exp(ls / n), exp(lt / n)
					}'
			else
				printf '%-4s %-5s run %d  NPtcp: no output\n' "$net" "$c" "$r"
			fi
			if [[ $cases == *" ab "* ]]; then
				printf '%-4s %-5s run %d  ab -n 5000 -c 8 nginx %s/%s req/s = %s   nginx CPU per request %s/%s us   system calls per request %s/%s\n' \
					"$net" "$c" "$r" "${v[$c.ab]}" "${v[tcp.ab]}" "$(ratio "${v[$c.ab]}" "${v[tcp.ab]}")" \
					"${v[$c.abcpu]}" "${v[tcp.abcpu]}" "${v[$c.absc]}" "${v[tcp.absc]}"
			fi
		done
		unset v
	done
done
