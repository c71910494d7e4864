# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# iperf3: forward, reverse (-R), 4 parallel streams (-P 4) and sendfile (-Z), one server.
# iperf3 checks nothing in the data; its control channel (JSON results exchanged over TCP)
# and the byte counts of both ends must agree.
iperf3_LABEL="iperf3 (-R, -P 4, -Z)"
iperf3_MIXED=server
iperf3_SDPSTAT=iperf3

iperf3_version() {
	iperf3 --version | head -n 1 | cut -d' ' -f1-2
}

iperf3_run() {
	local port
	port=$(app_port)
	bg "$D/server.out" "${SRV[@]}" iperf3 -s -B 127.0.0.1 -p "$port"
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$srv" $(listen_ports "$port") || return 1
	local name args rc
	for name in fwd rev par4 zero; do
		case $name in
		fwd) args=(-t 3) ;;
		rev) args=(-t 2 -R) ;;
		par4) args=(-t 2 -P 4) ;;
		zero) args=(-t 2 -Z) ;;
		esac
		rc=0
		timeout -k 3 30 env "${CLI[@]}" iperf3 -c 127.0.0.1 -p "$port" -J "${args[@]}" \
			>"$D/$name.json" 2>"$D/$name.err" || rc=$?
		((rc == 0)) || fail "iperf3 ${args[*]} exited with $rc: $(tail -c 300 "$D/$name.err") $(grep -a '"error"' "$D/$name.json")"
		local check
		check=$("$PYTHON" - "$D/$name.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e = d["end"]
sent, recv = e["sum_sent"]["bytes"], e["sum_received"]["bytes"]
streams = len(d["start"]["connected"])
bad = "" if sent > 0 and recv > 0 else "nothing moved"
print(round(e["sum_received"]["bits_per_second"] / 1e9, 2), streams, sent, recv, bad)
PY
) || { fail "iperf3 ${args[*]}: no usable JSON result"; continue; }
		read -r gbps streams sent recv bad <<<"$check"
		[[ -z $bad ]] || fail "iperf3 ${args[*]}: $bad"
		local want=1
		[[ $name == par4 ]] && want=4
		((streams == want)) || fail "iperf3 ${args[*]}: $streams streams, wanted $want"
		[[ $name == fwd ]] && RATE=$gbps RATE_UNIT=Gbit/s
		printf '    iperf3 %-8s %s Gbit/s (%s streams)\n' "${args[*]}" "$gbps" "$streams"
	done
	stop_bg "$srv" INT
}
