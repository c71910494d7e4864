# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# memcached -t 4 ↔ memcaslap (8 connections, 10% sets, 10% of the gets verified by the tool)
# and memcslap (4 threads loading keys); memccp/memccat store and read back a 512 KiB value
# (sha256; memccat appends a newline, which is cut off).
memcached_LABEL="memcached -t 4 ↔ memcaslap, memcslap"
memcached_MIXED=server
memcached_SDPSTAT=memcached

memcached_version() {
	memcached -V
}

memcached_run() {
	local port
	port=$(app_port)
	bg "$D/server.out" "${SRV[@]}" memcached -t 4 -p "$port" -l 127.0.0.1 -U 0 -u nobody
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$srv" $(listen_ports "$port") || return 1
	local rc=0
	timeout -k 3 60 env "${CLI[@]}" memcaslap -s "127.0.0.1:$port" -T 2 -c 8 -x 20000 \
		--verify=0.1 >"$D/memcaslap.out" 2>&1 || rc=$?
	((rc == 0)) || fail "memcaslap exited with $rc: $(tail -c 300 "$D/memcaslap.out")"
	local k
	for k in verify_misses verify_failed; do
		grep -q "^$k: 0$" "$D/memcaslap.out" || fail "memcaslap: $(grep "^$k" "$D/memcaslap.out" || echo "no $k line")"
	done
	grep -q '^cmd_get: 18000$' "$D/memcaslap.out" || fail "memcaslap: $(grep '^cmd_get' "$D/memcaslap.out" || echo 'no cmd_get line'), wanted 18000"
	rc=0
	timeout -k 3 60 env "${CLI[@]}" memcslap --servers="127.0.0.1:$port" --concurrency=4 \
		--execute-number=2000 >"$D/memcslap.out" 2>&1 || rc=$?
	((rc == 0)) || fail "memcslap exited with $rc: $(tail -c 300 "$D/memcslap.out")"
	head -c 524288 "$WORK/data/32M.bin" >"$D/value"
	rc=0
	(cd "$D" && timeout -k 3 20 env "${CLI[@]}" memccp --servers="127.0.0.1:$port" value) || rc=$?
	((rc == 0)) || fail "memccp exited with $rc"
	[[ $(timeout -k 3 20 env "${CLI[@]}" memccat --servers="127.0.0.1:$port" value | head -c 524288 | sha256sum | cut -d' ' -f1) == "$(sha "$D/value")" ]] ||
		fail "the 512 KiB value read back with memccat differs (sha256)"
	# the fixed workload above can pass between two sdpstat snapshots
	sdpstat_await memcached 30 hold_conn "$port" 3 'version\r\n'
	stop_bg "$srv" TERM
	RATE=$(sed -n 's/.* TPS: \([0-9]*\) .*/\1/p' "$D/memcaslap.out") RATE_UNIT="ops/s"
}
