#!/usr/bin/env bash
# bench-connect.sh: what a connection's set-up costs, plain TCP and under libsdp, in one run on
# 127.0.0.1:
#   - connection rate: one client process makes N connections in a row to one server process
#     (connect, 1 byte each way, close; both Python), per connection: median and mean, and the
#     median of each call (socket, connect, the first send, the first receive, close): under
#     libsdp the first send waits for the accepting side's MPA Request and answers it; and the
#     CPU time each process spent per connection (user and system, every thread);
#   - time to first byte of a fresh curl process against python3 -m http.server (median of R).
# libsdp runs with its default (shared memory between two processes of this host) and over iWARP
# (SDP_SHM=0). BASE_SHIM=path/to/other/libsdp.so adds the same rows for another build, e.g. the one before a
# change, with the libsdp-engine.so beside it (else build/libsdp-engine.so).
#
#   bash scripts/bench-connect.sh [N=2000] [R=20]
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap stop_all EXIT
require_build
require_cmd curl
n=${1:-2000} r=${2:-20}
tmp=$(mktemp -d /tmp/libsdp-connect.XXXXXX)
trap 'stop_all; rm -rf "$tmp"' EXIT
echo "index" >"$tmp/index.html"

cat >"$tmp/server.py" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(128)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    if c.recv(1):
        c.sendall(b"y")
    c.close()
EOF
cat >"$tmp/client.py" <<'EOF'
import resource, socket, sys, time, statistics
port, n = int(sys.argv[1]), int(sys.argv[2])
phases = ("socket", "connect", "send", "recv", "close")
ts, ph = [], {k: [] for k in phases}
for i in range(n):
    if i == n // 10:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        cpu0 = ru.ru_utime + ru.ru_stime
    t = [time.perf_counter()]
    c = socket.socket()
    t.append(time.perf_counter())
    c.connect(("127.0.0.1", port))
    t.append(time.perf_counter())
    c.sendall(b"x")
    t.append(time.perf_counter())
    assert c.recv(1) == b"y"
    t.append(time.perf_counter())
    c.close()
    t.append(time.perf_counter())
    ts.append(t[-1] - t[0])
    for i, k in enumerate(phases):
        ph[k].append(t[i + 1] - t[i])
ts = ts[n // 10:]  # the first tenth warms up
ru = resource.getrusage(resource.RUSAGE_SELF)
print("median_us=%.1f mean_us=%.1f conns_per_s=%.0f client_cpu_us=%.1f" % (statistics.median(ts) * 1e6, statistics.mean(ts) * 1e6, len(ts) / sum(ts),
      (ru.ru_utime + ru.ru_stime - cpu0) * 1e6 / len(ts)),
      " ".join("%s_us=%.1f" % (k, statistics.median(v[n // 10:]) * 1e6) for k, v in ph.items()))
EOF

# wait_ready FILE: until the server said ready (bounded).
wait_ready() {
	local i
	for i in $(seq 1 100); do
		grep -q ready "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	die "server did not start: $(cat "$1")"
}

# row NAME SHIM: SHIM "" is plain TCP.
row() {
	local name=$1 so=$2 pre=() port eng=$LIBSDP_ENGINE
	shift 2
	[[ -n $so && -f $(dirname "$so")/libsdp-engine.so ]] && eng=$(dirname "$so")/libsdp-engine.so
	[[ -n $so ]] && pre=(LD_PRELOAD="$so" SDP_ENGINE="$eng" "$@")
	port=$(free_port)
	start_bg "$tmp/srv.out" "${pre[@]}" "$PYTHON" -u "$tmp/server.py" "$port"
	local srv=$BG_PID
	wait_ready "$tmp/srv.out"
	local rate t0 t1
	t0=$(cpu_ms "$srv")
	rate=$(env -u LD_PRELOAD "${pre[@]}" "$PYTHON" "$tmp/client.py" "$port" "$n")
	t1=$(cpu_ms "$srv")
	rate+=" server_cpu_us=$(awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.1f", (b - a) * 1e3 / n }')"
	stop_proc "$srv"
	port=$(free_port)
	start_bg "$tmp/http.out" "${pre[@]}" "$PYTHON" -m http.server --bind 127.0.0.1 --directory "$tmp" "$port"
	local http=$BG_PID i ttfb=()
	for i in $(seq 1 50); do
		curl -s -o /dev/null --noproxy '*' "http://127.0.0.1:$port/index.html" && break
		sleep 0.1
	done
	for i in $(seq 1 "$r"); do
		ttfb+=("$(env -u LD_PRELOAD "${pre[@]}" curl -s -o /dev/null --noproxy '*' -w '%{time_starttransfer}' \
			"http://127.0.0.1:$port/index.html")")
	done
	stop_proc "$http"
	local med
	med=$(printf '%s\n' "${ttfb[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]*1e6}')
	printf '%-10s %s curl_ttfb_median_us=%s\n' "$name" "$rate" "$med"
}

# What the owner check (shim/trust.c) adds to each preloaded connect, alone.
gcc -O2 -D_GNU_SOURCE -I"$LIBSDP_ROOT" -o "$tmp/trust_cost" "$LIBSDP_ROOT/scripts/bench/trust_cost.c" \
	"$LIBSDP_ROOT/shim/trust.c"
port=$(free_port)
start_bg "$tmp/twin.out" LD_PRELOAD="$LIBSDP_SO" "$PYTHON" -u "$tmp/server.py" "$port"
twin=$BG_PID
wait_ready "$tmp/twin.out"
"$tmp/trust_cost" 127.0.0.1 "$port" "$(sdp_port "$port")"
stop_proc "$twin"

info "$n connections per row (the first tenth not counted), $r curl processes; 127.0.0.1"
row tcp ""
row libsdp "$LIBSDP_SO"
row sdp-iwarp "$LIBSDP_SO" SDP_SHM=0
[[ -n ${BASE_SHIM:-} ]] && row base "$BASE_SHIM"
exit 0
