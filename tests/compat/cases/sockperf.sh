# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# sockperf over TCP: ping-pong of 64-byte messages for 2 s (sockperf numbers every message and
# counts the dropped, duplicated and out-of-order ones: all must be 0), then throughput of
# 1400-byte messages for 2 s. The rate is the ping-pong's average latency (lower is better).
sockperf_LABEL="sockperf ping-pong, throughput"
sockperf_MIXED=server
sockperf_SDPSTAT=sockperf

sockperf_version() {
	sockperf --version 2>&1 | head -n 1 | sed 's/, version / /'
}

sockperf_run() {
	local port
	port=$(app_port)
	bg "$D/server.out" "${SRV[@]}" sockperf server --tcp -i 127.0.0.1 -p "$port"
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$srv" $(listen_ports "$port") || return 1
	local rc=0
	timeout -k 3 30 env "${CLI[@]}" sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -t 2 -m 64 \
		>"$D/pp.out" 2>&1 || rc=$?
	((rc == 0)) || fail "sockperf ping-pong exited with $rc: $(tail -c 300 "$D/pp.out")"
	grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$D/pp.out" ||
		fail "sockperf ping-pong: $(grep -a 'dropped messages' "$D/pp.out" || echo 'no message count')"
	local sent recv
	sent=$(sed -n '/Valid Duration/s/.*SentMessages=\([0-9]*\).*/\1/p' "$D/pp.out")
	recv=$(sed -n '/Valid Duration/s/.*ReceivedMessages=\([0-9]*\).*/\1/p' "$D/pp.out")
	((${sent:-0} > 0 && sent == ${recv:-0})) || fail "sockperf ping-pong: sent ${sent:-?}, received ${recv:-?}"
	rc=0
	timeout -k 3 30 env "${CLI[@]}" sockperf throughput --tcp -i 127.0.0.1 -p "$port" -t 2 -m 1400 \
		>"$D/tp.out" 2>&1 || rc=$?
	((rc == 0)) || fail "sockperf throughput exited with $rc: $(tail -c 300 "$D/tp.out")"
	local msgs
	msgs=$(sed -n 's/.*Message Rate is \([0-9]*\).*/\1/p' "$D/tp.out")
	((${msgs:-0} > 0)) || fail "sockperf throughput: no message rate"
	stop_bg "$srv" INT
	RATE=$(sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p' "$D/pp.out") RATE_UNIT="µs latency"
	printf '    sockperf: latency %s µs, throughput %s msg/s of 1400 bytes\n' "$RATE" "$msgs"
}
