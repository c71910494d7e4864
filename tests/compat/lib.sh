# shellcheck shell=bash disable=SC2034,SC1007,SC2100 # variables read by name; "VAR= " empties
# The compatibility suite's framework: modes, process groups, libsdp's evidence, the table.
# Sourced by tests/compat/run.sh; the cases live in tests/compat/cases/*.sh.
#
# A case NAME defines:
#   NAME_version          prints the program's version
#   NAME_run MODE         runs the workload once; MODE is sdp (both ends preloaded), mixed (only
#                         the end named by NAME_MIXED preloaded) or plain (nothing preloaded)
#   NAME_MIXED=server|client
#   NAME_SDPSTAT=PROG     (optional) the server program sdpstat must show with SDP sockets
#                         while the workload runs, in the sdp mode
#   NAME_SELF_SDP=1       (optional) the preloaded end also connects to itself (over SDP)
#   NAME_TCP_RULE=RULE    (optional) for a server that cannot run over SDP: the libsdp.conf
#                         rule its sdp mode runs with (both ends then must use TCP); the
#                         case also adds "program|reason" to UNSUPPORTED
# Inside NAME_run: "${SRV[@]}" and "${CLI[@]}" are the environment of each end (give them to
# env), $D is a fresh directory for the run, fail MSG records a failed check (known_fail MSG
# one the case explains as the program's own fault), RATE and
# RATE_UNIT give the throughput or rate, and bg / stop_bg start and stop server processes.

# case_var CASE NAME DEFAULT prints CASE_NAME, or DEFAULT when it is unset or empty.
case_var() {
	local v="${1}_$2"
	printf '%s\n' "${!v:-$3}"
}

# ---- processes ------------------------------------------------------------

GROUPS_STARTED=()

# bg OUT CMD... starts CMD in its own process group (so its children can be reaped with it),
# output to OUT, stdin from /dev/null, LD_PRELOAD only if CMD's env sets it; sets BG_PID.
bg() {
	local out=$1
	shift
	setsid env -u LD_PRELOAD --default-signal=INT "$@" >"$out" 2>&1 </dev/null &
	BG_PID=$!
	GROUPS_STARTED+=("$BG_PID")
}

# stop_bg PID [SIGNAL] [SECONDS]: asks the group leader to stop (default SIGTERM), waits up to
# SECONDS (default 10), then kills what is left of its group; always reaps the leader.
stop_bg() {
	local pid=$1 sig=${2:-TERM} secs=${3:-10}
	kill "-$sig" "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + secs))
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		fail "process $pid ($(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-60)) did not stop on SIG$sig within ${secs}s"
	fi
	kill -KILL -- "-$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# kill_groups kills every process group bg started (what stop_bg left, and after a failure).
kill_groups() {
	local pid
	for pid in "${GROUPS_STARTED[@]}"; do
		kill -KILL -- "-$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	GROUPS_STARTED=()
}

# wait_port SECONDS PID PORT...: waits until something listens on every PORT of 127.0.0.1;
# fails the run if PID exits first or time runs out.
wait_port() {
	local secs=$1 pid=$2 port
	shift 2
	local deadline=$((SECONDS + secs))
	for port in "$@"; do
		until [[ -n $(ss -Hltn "( sport = :$port )" 2>/dev/null) ]]; do
			if ! kill -0 "$pid" 2>/dev/null; then
				fail "server $pid exited before listening on port $port"
				return 1
			fi
			if ((SECONDS >= deadline)); then
				fail "nothing listens on port $port after ${secs}s"
				return 1
			fi
			sleep 0.05
		done
	done
}

# app_port prints a free port P whose SDP port is free too (the hidden listener needs it).
app_port() {
	free_port
}

# listen_ports P prints P and, when the server end is preloaded (and no rule keeps it on
# TCP), its SDP port.
listen_ports() {
	if [[ ($MODE == sdp && -z $SDP_TCP_RULE) || ($MODE == mixed && $MIXED == server) ]]; then
		echo "$1 $(sdp_port "$1")"
	else
		echo "$1"
	fi
}

# ---- evidence from libsdp -------------------------------------------------

# preload_env SIDE prints the environment of a preloaded end, one VAR=VALUE a line.
preload_env() {
	printf '%s\n' "LD_PRELOAD=$LIBSDP_SO" SDP_STATS=1 SDP_LOG_LEVEL=info \
		"SDP_LOG_FILE=$LOGD/$1.%p.log"
}

# stats_sum SIDE KEY sums KEY over the exit lines of every process of SIDE.
stats_sum() {
	cat "$LOGD/$1".*.log 2>/dev/null | grep -a 'libsdp: stats ' |
		awk -v k="$2" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) s += kv[2] } }
			END { print s + 0 }'
}

# stats_procs SIDE counts the exit lines of SIDE.
stats_procs() {
	cat "$LOGD/$1".*.log 2>/dev/null | grep -ac 'libsdp: stats ' || true
}

# reasons SIDE prints the distinct fallback reasons SIDE logged.
reasons() {
	cat "$LOGD/$1".*.log 2>/dev/null | grep -ao 'transport=tcp reason=[a-z-]*' |
		sed 's/.*reason=//' | sort -u | paste -sd, -
}

# reason_count SIDE REASON: how many of SIDE's connections went to TCP for REASON.
reason_count() {
	cat "$LOGD/$1".*.log 2>/dev/null | grep -ac "transport=tcp reason=$2\b" || true
}

# sdpstat_watch samples build/sdpstat --json every 0.2 s until sdpstat_stop, noting each
# listed process's ancestors and their sessions (the servers started by bg lead sessions).
sdpstat_watch() {
	"$PYTHON" - "$SDPSTAT" "$D/sdpstat.jsonl" <<'PY' &
import json, subprocess, sys, time
out = open(sys.argv[2], "w")
for _ in range(3000):
    try:
        doc = json.loads(subprocess.run([sys.argv[1], "--json"], capture_output=True, timeout=5).stdout)
    except Exception:
        doc = {}
    for p in doc.get("processes") or []:
        # the process and its ancestors (servers' children may start sessions of their own)
        p["up"], pid = [], p["pid"]
        for _ in range(32):
            try:
                st = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
            except Exception:
                break
            p["up"] += [pid, int(st[3])]
            pid = int(st[1])
            if pid <= 1:
                break
    out.write(json.dumps(doc) + "\n")
    out.flush()
    time.sleep(0.2)
PY
	WATCH_PID=$!
}

sdpstat_stop() {
	[[ -n ${WATCH_PID:-} ]] || return 0
	kill "$WATCH_PID" 2>/dev/null || true
	wait "$WATCH_PID" 2>/dev/null || true
	WATCH_PID=
}

# sdpstat_await PROG SECONDS CMD...: while the sdpstat watcher runs, runs CMD (a client that
# holds an SDP connection to the server for a moment) until a snapshot has shown an SDP socket
# in PROG, for at most SECONDS: a fixed workload can end between two snapshots when it runs
# fast, and the check that sdpstat sees the server's connections is about sdpstat, not luck.
sdpstat_await() {
	local prog=$1 secs=$2
	shift 2
	[[ -n ${WATCH_PID:-} ]] || return 0
	local deadline=$((SECONDS + secs)) seen
	while ((SECONDS < deadline)); do
		read -r -a seen < <(sdpstat_seen "$prog" "${GROUPS_STARTED[@]}")
		((${seen[1]:-0} >= 1)) && return 0
		"$@" >/dev/null 2>&1 || true
	done
}

# hold_conn PORT SECS REQUEST: a preloaded client (the case's CLI environment) connects to the
# server on 127.0.0.1:PORT, sends REQUEST (printf escapes), reads the first reply and keeps the
# connection for SECS: the connection sdpstat_await waits to see in a snapshot.
hold_conn() {
	timeout -k 3 $(($2 + 10)) env "${CLI[@]}" "$PYTHON" -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(sys.argv[3].encode().decode("unicode_escape").encode("latin-1"))
if not s.recv(4096):
    sys.exit("hold_conn: the server closed without a reply")
time.sleep(float(sys.argv[2]))
' "$1" "$2" "$3"
}

# sdpstat_seen PROG SID... prints "P S": how many processes whose name starts with PROG, in
# the sessions SID... (the servers) or below them, sdpstat listed, and the most SDP sockets
# one snapshot showed in them together.
sdpstat_seen() {
	"$PYTHON" - "$D/sdpstat.jsonl" "$@" <<'PY'
import json, sys
sids = {int(x) for x in sys.argv[3:]}
pids, best = set(), 0
for line in open(sys.argv[1]):
    try:
        doc = json.loads(line)
    except ValueError:
        continue
    n = 0
    for p in doc.get("processes") or []:
        if not str(p.get("prog")).startswith(sys.argv[2]) or not sids & set(p.get("up") or []):
            continue
        pids.add(p["pid"])
        n += sum(1 for s in p.get("sockets") or [] if s.get("transport") == "sdp")
    best = max(best, n)
print(len(pids), best)
PY
}

# ---- results ----------------------------------------------------------------

fail() {
	FAILS+=("$*")
	printf '    FAIL: %s\n' "$*"
}

# known_fail MSG records a failure the case knows and explains (a fault of the program itself,
# seen without libsdp too): the run shows "FAIL (known)" and the suite still passes.
known_fail() {
	KNOWNS+=("$*")
	printf '    known failure: %s\n' "$*"
}

# check_transport verifies, from the exit lines and the per-connection log lines, that the
# run's connections took the transport its mode calls for; sets SEEN.
check_transport() {
	local csdp ctcp ssdp stcp
	csdp=$(stats_sum cli sdp_conns) ctcp=$(stats_sum cli tcp_conns)
	ssdp=$(stats_sum srv sdp_conns) stcp=$(stats_sum srv tcp_conns)
	local mode=$MODE
	[[ $MODE == sdp && -n $SDP_TCP_RULE ]] && mode=sdp-rule
	case $mode in
	sdp-rule)
		# the server's rule keeps the case on TCP with both ends preloaded
		((ctcp >= 1 && csdp == 0)) || fail "client: wanted TCP only (sdp_conns=$csdp tcp_conns=$ctcp)"
		((stcp >= 1 && ssdp == 0)) || fail "server: wanted TCP by rule (sdp_conns=$ssdp tcp_conns=$stcp)"
		SEEN="tcp (client: $(reasons cli); server: $(reasons srv))"
		;;
	sdp)
		# A client whose connections to a peer carry little makes most of them over
		# plain TCP (short-connections, SDP_SHORT_TCP), which its server accepts on the
		# application's port (plain-peer): libsdp's choice, not a fallback.
		local short
		short=$(reason_count cli short-connections)
		((csdp >= 1)) || fail "client: no connection over SDP (sdp_conns=$csdp, $(stats_procs cli) exit lines)"
		((ctcp == short)) || fail "client: $((ctcp - short)) connection(s) fell back to TCP ($(reasons cli))"
		if [[ ${SRV_EXIT_STATS:-1} == 1 ]]; then
			((ssdp >= 1)) || fail "server: no connection over SDP (sdp_conns=$ssdp, $(stats_procs srv) exit lines)"
		fi
		((stcp <= short && stcp == $(reason_count srv plain-peer))) ||
			fail "server: $stcp connection(s) fell back to TCP ($(reasons srv)), $short made so by the client"
		SEEN="sdp: $csdp client, $ssdp server conns"
		((short == 0)) || SEEN+="; tcp: $short client conns (short-connections)"
		;;
	mixed)
		local side=srv sdp=$ssdp tcp=$stcp
		if [[ $MIXED == client ]]; then
			side=cli sdp=$csdp tcp=$ctcp
		fi
		((tcp >= 1)) || fail "$MIXED (preloaded): no connection counted as TCP fallback (tcp_conns=$tcp, $(stats_procs $side) exit lines)"
		SEEN="tcp ($(reasons $side))"
		if [[ $(case_var "$CASE" SELF_SDP 0) == 1 ]]; then
			SEEN+=" + $sdp SDP of the preloaded process to itself"
		else
			((sdp == 0)) || fail "$MIXED (preloaded): $sdp connection(s) claim SDP with a plain peer"
		fi
		;;
	plain) SEEN=tcp ;;
	esac
}

# run_mode CASE MODE runs one case in one mode and records the verdict and the rate.
run_mode() {
	local c=$1
	CASE=$1 MODE=$2
	MIXED=$(case_var "$c" MIXED "server")
	D=$WORK/$c-$MODE
	LOGD=$D/log
	mkdir -p "$LOGD"
	chmod 777 "$LOGD"
	chmod 755 "$D"
	SRV=(-u LD_PRELOAD) CLI=(-u LD_PRELOAD)
	if [[ $MODE == sdp || ($MODE == mixed && $MIXED == server) ]]; then
		mapfile -t SRV < <(preload_env srv)
	fi
	if [[ $MODE == sdp || ($MODE == mixed && $MIXED == client) ]]; then
		mapfile -t CLI < <(preload_env cli)
	fi
	FAILS=() KNOWNS=() RATE= RATE_UNIT= SEEN= WATCH_PID= SRV_EXIT_STATS=1
	local t0=$SECONDS
	printf '  %-10s %-6s ' "$c" "$MODE"
	echo
	local statprog statnote=
	statprog=$(case_var "$c" SDPSTAT "")
	SDP_TCP_RULE=$(case_var "$c" TCP_RULE "")
	if [[ $MODE == sdp && -n $SDP_TCP_RULE ]]; then
		# The case cannot run over SDP: a libsdp.conf rule keeps its server on TCP, and the
		# run shows that both ends preloaded still work.
		echo "$SDP_TCP_RULE" >"$D/libsdp.conf"
		SRV+=("SDP_CONFIG_FILE=$D/libsdp.conf")
		statprog=
	fi
	if [[ $MODE == sdp && -n $statprog ]]; then
		sdpstat_watch
	fi
	"${c}_run" "$MODE" || fail "${c}_run returned $?"
	sdpstat_stop
	local servers=("${GROUPS_STARTED[@]}")
	kill_groups
	if [[ $MODE == sdp && -n $statprog ]]; then
		local seen
		read -r -a seen < <(sdpstat_seen "$statprog" "${servers[@]}")
		if ((${seen[1]:-0} < 1)); then
			fail "sdpstat never showed an SDP socket in the server ($statprog) while it ran (${seen[0]:-0} processes listed)"
		else
			statnote="; sdpstat: ${seen[1]} SDP socket(s) in ${seen[0]} server process(es)"
		fi
	fi
	check_transport
	SEEN+=$statnote
	local verdict=PASS
	if ((${#FAILS[@]} > 0)); then
		verdict=FAIL
	elif ((${#KNOWNS[@]} > 0)); then
		verdict="FAIL (known)" # shown as such; does not fail the suite
	fi
	RESULT[$c.$MODE]=$verdict
	RATES[$c.$MODE]=$RATE
	UNITS[$c]=${RATE_UNIT:-${UNITS[$c]:-}}
	[[ $MODE == plain ]] || SEENS[$c.$MODE]=$SEEN
	printf '    %s in %ds: %s%s\n' "$verdict" $((SECONDS - t0)) "$SEEN" "${RATE:+, $RATE ${RATE_UNIT:-}}"
	if [[ $verdict == FAIL* ]]; then
		[[ $verdict == FAIL ]] && TOTAL_FAILS=$((TOTAL_FAILS + 1))
		if [[ ${COMPAT_KEEP:-0} != 1 ]]; then
			local f
			for f in "$LOGD"/*.log "$D"/*.out; do
				[[ -f $f ]] || continue
				echo "    --- $(basename "$f") (last lines)"
				tail -n 8 "$f" | sed 's/^/    | /'
			done
		fi
	fi
	if [[ ${COMPAT_KEEP:-0} != 1 ]]; then
		rm -rf "$D"
	fi
}
