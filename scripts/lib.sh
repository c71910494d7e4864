# shellcheck shell=bash
# Shell helpers shared by the scripts in this directory. Source it; do not run it.
#
# Every wait here is bounded, and every process started through start_bg is stopped by
# stop_all (the scripts call it from their EXIT trap).

LIBSDP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# LIBSDP_BUILD=dir measures another build (e.g. the one before a change) with the same script.
LIBSDP_SO=${LIBSDP_BUILD:-$LIBSDP_ROOT/build}/libsdp.so
LIBSDP_ENGINE=${LIBSDP_BUILD:-$LIBSDP_ROOT/build}/libsdp-engine.so
PYTHON=/usr/bin/python3
SCRIPT_NAME=$(basename "$0" .sh)

info() { printf '%s: %s\n' "$SCRIPT_NAME" "$*"; }
warn() { printf '%s: warning: %s\n' "$SCRIPT_NAME" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$SCRIPT_NAME" "$*" >&2
	exit 1
}

# use_go puts Go on PATH (it lives in /usr/local/go/bin on a fresh machine) or fails.
use_go() {
	if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
		PATH=/usr/local/go/bin:$PATH
		export PATH
	fi
	command -v go >/dev/null 2>&1 ||
		die "go not found (looked in PATH and /usr/local/go/bin): install Go (version in go.mod)"
}

# require_build fails unless both shared objects exist.
require_build() {
	[[ -f $LIBSDP_SO && -f $LIBSDP_ENGINE ]] ||
		die "build/libsdp.so or build/libsdp-engine.so is missing: run 'make' first"
}

# require_cmd NAME... fails unless every command exists.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || die "$c not found: run 'make deps' first"
	done
}

# sdp_port P prints the TCP port of the SDP listener for application port P:
# P + SDP_PORT_OFFSET (default 20000), wrapped into 1024..65535.
sdp_port() {
	local off=${SDP_PORT_OFFSET:-20000} span=$((65536 - 1024))
	echo $(((($1 - 1024 + off) % span + span) % span + 1024))
}

# free_port prints a port P, chosen by the kernel, such that P and its SDP port P+offset
# (without wrapping) are both free on 127.0.0.1 right now.
free_port() {
	env -u LD_PRELOAD "$PYTHON" - "${SDP_PORT_OFFSET:-20000}" <<'EOF'
import socket, sys
off = int(sys.argv[1])
for _ in range(500):
    a = socket.socket()
    a.bind(("127.0.0.1", 0))
    p = a.getsockname()[1]
    if 1024 <= p + off <= 65535:
        b = socket.socket()
        try:
            b.bind(("127.0.0.1", p + off))
        except OSError:
            b.close(); a.close(); continue
        b.close(); a.close()
        print(p)
        sys.exit(0)
    a.close()
sys.exit("no free port pair found")
EOF
}

# listening PORT succeeds when some socket listens on TCP port PORT.
listening() {
	[[ -n $(ss -Hltn "( sport = :$1 )" 2>/dev/null) ]]
}

# wait_listen PID SECONDS PORT... waits until every PORT has a listener; fails early if
# PID exits, and after SECONDS.
wait_listen() {
	local pid=$1 secs=$2 port
	shift 2
	local deadline=$((SECONDS + secs))
	for port in "$@"; do
		until listening "$port"; do
			kill -0 "$pid" 2>/dev/null || die "process $pid exited before listening on port $port"
			((SECONDS < deadline)) || die "nothing listens on port $port after ${secs}s"
			sleep 0.05
		done
	done
}

BG_PIDS=()

# start_bg OUTFILE [VAR=VALUE...] CMD... starts CMD in the background, output to OUTFILE, with
# SIGINT at its default (a non-interactive shell would otherwise start it ignored) and without
# an inherited LD_PRELOAD (pass LD_PRELOAD=... to preload); sets BG_PID.
start_bg() {
	local out=$1
	shift
	env -u LD_PRELOAD --default-signal=INT "$@" >"$out" 2>&1 </dev/null &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
}

# stop_proc PID [SECONDS]: SIGINT (python then exits normally and atexit handlers run),
# wait up to SECONDS (default 10), then SIGKILL.
stop_proc() {
	local pid=$1 secs=${2:-10}
	kill -0 "$pid" 2>/dev/null || {
		wait "$pid" 2>/dev/null || true
		return 0
	}
	kill -INT "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + secs))
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		warn "process $pid still running ${secs}s after SIGINT: killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# stop_all stops every process started with start_bg.
stop_all() {
	local pid
	for pid in "${BG_PIDS[@]}"; do
		stop_proc "$pid" 5
	done
	BG_PIDS=()
}

# stats_line FILE... prints the last libsdp stats line found in the files (or nothing).
stats_line() {
	cat "$@" 2>/dev/null | grep -a 'libsdp: stats ' | tail -n 1 || true
}

# stat_get LINE KEY prints the value of KEY in a stats line, or nothing.
stat_get() {
	local kv
	for kv in $1; do
		if [[ $kv == "$2="* ]]; then
			echo "${kv#*=}"
			return 0
		fi
	done
}

# stat_num LINE KEY prints the value of KEY as a number, -1 when it is absent.
stat_num() {
	local v
	v=$(stat_get "$1" "$2")
	[[ $v =~ ^[0-9]+$ ]] || v=-1
	echo "$v"
}

# cpu_ms PID prints the CPU time (user and system, its ended threads included) the process has
# used so far, in milliseconds.
cpu_ms() {
	local stat
	stat=$(<"/proc/$1/stat")
	awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($12 + $13) * 1000 / hz }' <<<"${stat##*) }"
}

# sha FILE prints the SHA-256 of FILE.
sha() {
	sha256sum "$1" | cut -d' ' -f1
}

# haproxy_http_cfg FILE PORT BACKEND_PORT writes the configuration of haproxy in HTTP mode with
# its default buffers, on 127.0.0.1:PORT in front of 127.0.0.1:BACKEND_PORT: the compatibility
# case's and scripts/bench-proxy.sh's, so that the benchmark measures what the row runs.
haproxy_http_cfg() {
	cat >"$1" <<CFG
global
    maxconn 100
defaults
    mode http
    timeout connect 10s
    timeout client 60s
    timeout server 60s
frontend fe
    bind 127.0.0.1:$2
    default_backend be
backend be
    server s1 127.0.0.1:$3
CFG
}

# ---- two network namespaces joined by a veth pair ----------------------------------------

# veth_names TAG NET names the pair this process may create: namespaces TAG-a-PID and
# TAG-b-PID, addresses ADDR_A and ADDR_B in 10.NET.x.0/24 (NS_A, NS_B, VETH_A, VETH_B).
veth_names() {
	local tag=$1 net=$2 short=${1:0:4}
	NS_A=$tag-a-$$ NS_B=$tag-b-$$ VETH_A=$short$$a VETH_B=$short$$b
	ADDR_A=10.$net.$(($$ % 200)).1 ADDR_B=10.$net.$(($$ % 200)).2
	VETH_UP=0
}

# veth_up creates the pair named by veth_names (once) and waits, bounded, until both ends of
# the link are up. The two namespaces are two hosts to libsdp, each the operator's own: it
# vouches for them in SDP_TRUST_REMOTE (SECURITY.md), or the programs would use TCP.
veth_up() {
	((VETH_UP)) && return 0
	export SDP_TRUST_REMOTE="$ADDR_A,$ADDR_B"
	ip netns add "$NS_A"
	ip netns add "$NS_B"
	VETH_UP=1
	ip link add "$VETH_A" type veth peer name "$VETH_B"
	ip link set "$VETH_A" netns "$NS_A"
	ip link set "$VETH_B" netns "$NS_B"
	ip -n "$NS_A" addr add "$ADDR_A/24" dev "$VETH_A"
	ip -n "$NS_B" addr add "$ADDR_B/24" dev "$VETH_B"
	ip -n "$NS_A" link set lo up
	ip -n "$NS_B" link set lo up
	ip -n "$NS_A" link set "$VETH_A" up
	ip -n "$NS_B" link set "$VETH_B" up
	local i
	for i in $(seq 1 50); do
		ip -n "$NS_A" link show "$VETH_A" | grep -q LOWER_UP &&
			ip -n "$NS_B" link show "$VETH_B" | grep -q LOWER_UP && return 0
		sleep 0.1
	done
	die "veth link between $NS_A and $NS_B does not come up"
}

# veth_down removes the pair if this process created it (the veth goes with its namespaces).
veth_down() {
	((${VETH_UP:-0})) || return 0
	ip netns del "$NS_A" 2>/dev/null || true
	ip netns del "$NS_B" 2>/dev/null || true
	VETH_UP=0
}
