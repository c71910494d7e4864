#!/usr/bin/env bash
# What a blocking wait's poll over shared memory costs and gives (SDP_POLL_US, sdpcore/spin.go):
# a Python echo server that receives with a blocking recv(), and a client that sends 64 bytes,
# reads the echo and then works PAUSE µs (busy) before the next, both preloaded, on 127.0.0.1;
# the server's CPU per message and the client's median round trip, with the default poll, with
# none (SDP_POLL_US=0) and over plain TCP (neither end preloaded), ROUNDS rounds in turn, for a
# client that pauses and one that does not.
#
#   bash scripts/bench-pollwait.sh [ROUNDS=3] [PAUSE=200] [MESSAGES=3000]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"
require_build
rounds=${1:-3} pause=${2:-200} n=${3:-3000}
tmp=$(mktemp -d /tmp/libsdp-pollwait.XXXXXX)
trap 'stop_all; rm -rf "$tmp"' EXIT
cat >"$tmp/server.py" <<'PY'
import resource, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0)); s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
n, r0 = 0, resource.getrusage(resource.RUSAGE_SELF)
while True:
    b = c.recv(64)
    if not b:
        break
    c.sendall(b)
    n += 1
r = resource.getrusage(resource.RUSAGE_SELF)
print("%.1f" % ((r.ru_utime + r.ru_stime - r0.ru_utime - r0.ru_stime) / max(n, 1) * 1e6))
PY
cat >"$tmp/client.py" <<'PY'
import socket, sys, time
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
pause, lat = float(sys.argv[2]) / 1e6, []
for _ in range(int(sys.argv[3])):
    t = time.perf_counter()
    c.sendall(b"x" * 64)
    got = 0
    while got < 64:
        got += len(c.recv(64 - got))
    lat.append(time.perf_counter() - t)
    end = time.perf_counter() + pause
    while time.perf_counter() < end:
        pass
c.close()
lat.sort()
print("%.1f" % (lat[len(lat) // 2] * 1e6))
PY
# one PAUSE tcp|ENV...: "server µs of CPU per message, client p50 µs"; tcp: neither end
# preloaded, else both, with ENV.
one() {
	local p=$1
	shift
	local pre=(LD_PRELOAD="$LIBSDP_SO" SDP_ENGINE="$LIBSDP_ENGINE" "$@")
	[[ ${1:-} == tcp ]] && pre=()
	rm -f "$tmp/port"
	env -u LD_PRELOAD "${pre[@]}" "$PYTHON" "$tmp/server.py" "$tmp/port" >"$tmp/server.out" &
	local srv=$!
	local i
	for i in $(seq 1 200); do
		[[ -s $tmp/port ]] && break
		sleep 0.02
	done
	[[ -s $tmp/port ]] || die "the echo server did not start"
	local p50
	p50=$(timeout 120 env -u LD_PRELOAD "${pre[@]}" "$PYTHON" "$tmp/client.py" "$(cat "$tmp/port")" "$p" "$n")
	wait "$srv"
	echo "$(cat "$tmp/server.out") µs, p50 $p50 µs"
}
printf '%-6s %-7s %-34s %-34s %-34s\n' round pause "SDP_POLL_US default: server CPU/msg" "SDP_POLL_US=0" "plain TCP"
for r in $(seq 1 "$rounds"); do
	for p in "$pause" 0; do
		printf '%-6s %-7s %-34s %-34s %-34s\n' "$r" "$p µs" "$(one "$p")" "$(one "$p" SDP_POLL_US=0)" "$(one "$p" tcp)"
	done
done
