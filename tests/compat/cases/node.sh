# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# node (Debian's nodejs): a net echo server and a client sending 32 MiB over 4 connections at
# once and reading every byte back (sha256 per connection, computed by node). The server ends
# by itself after the 4 connections have closed.
node_LABEL="node net echo server ↔ client"
node_MIXED=client
# (no sdpstat sample: its connections last well under a second, the exit lines count them)

node_version() {
	echo "node $(node --version)"
}

node_run() {
	local port
	port=$(app_port)
	bg "$D/server.out" "${SRV[@]}" node "$here/echo.js" server "$port" 4
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 30 "$srv" $(listen_ports "$port") || return 1
	local rc=0
	timeout -k 3 60 env "${CLI[@]}" node "$here/echo.js" client "$port" "$WORK/data/32M.bin" \
		>"$D/client.out" 2>&1 || rc=$?
	((rc == 0)) || fail "node client exited with $rc: $(tail -c 300 "$D/client.out")"
	local i
	for i in $(seq 1 200); do
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$srv" 2>/dev/null && fail "node server still running 10 s after its 4 connections"
	rc=0
	wait "$srv" || rc=$?
	((rc == 0)) || fail "node server exited with $rc: $(tail -c 300 "$D/server.out")"
	RATE=$(awk '$1 == "rate" { print $2 }' "$D/client.out") RATE_UNIT="MB/s"
}
