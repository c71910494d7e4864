# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# redis-server ↔ redis-benchmark (SET/GET, 20 connections) with a BGSAVE during the load (a
# fork of a process that holds SDP connections: it must not hang or corrupt), and redis-cli
# storing and reading back a 1 MiB value before and after (sha256); the dump is checked by
# redis-check-rdb.
redis_LABEL="redis-server ↔ redis-benchmark, redis-cli (BGSAVE)"
redis_MIXED=client
redis_SDPSTAT=redis-server

redis_version() {
	redis-server --version | cut -d' ' -f1-3
}

redis_cli() {
	timeout -k 3 20 env "${CLI[@]}" redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"
}

redis_run() {
	REDIS_PORT=$(app_port)
	bg "$D/server.out" "${SRV[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 \
		--dir "$D" --save '' --appendonly no --daemonize no
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$srv" $(listen_ports "$REDIS_PORT") || return 1
	head -c 1048576 "$WORK/data/32M.bin" >"$D/blob"
	local want
	want=$(sha "$D/blob")
	redis_cli -x SET blob <"$D/blob" >/dev/null || fail "redis-cli SET exited with $?"

	timeout -k 3 120 env "${CLI[@]}" redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c 20 \
		-n 20000 -r 10000 -t set,get --csv >"$D/bench.csv" 2>"$D/bench.err" &
	local bench=$!
	# BGSAVE once the benchmark has written keys
	local i keys=0
	for i in $(seq 1 200); do
		keys=$(redis_cli DBSIZE 2>/dev/null || echo 0)
		((keys > 100)) && break
		sleep 0.05
	done
	((keys > 100)) || fail "the benchmark wrote no keys ($keys) within 10 s"
	[[ $(redis_cli BGSAVE) == *"Background saving started"* ]] || fail "BGSAVE did not start"
	kill -0 "$bench" 2>/dev/null || fail "the benchmark ended before BGSAVE started (no load during the fork)"
	local info=
	for i in $(seq 1 400); do
		info=$(redis_cli INFO persistence | tr -d '\r')
		[[ $info == *rdb_bgsave_in_progress:0* ]] && break
		sleep 0.05
	done
	[[ $info == *rdb_bgsave_in_progress:0* ]] || fail "BGSAVE still running after 20 s"
	[[ $info == *rdb_last_bgsave_status:ok* ]] || fail "BGSAVE failed: $(grep -a bgsave <<<"$info" | tr '\n' ' ')"
	local rc=0
	wait "$bench" || rc=$?
	((rc == 0)) || fail "redis-benchmark exited with $rc: $(tail -c 300 "$D/bench.err")"
	redis-check-rdb "$D/dump.rdb" >"$D/check.out" 2>&1 || fail "redis-check-rdb: the dump is bad: $(tail -n 3 "$D/check.out")"
	[[ $(redis_cli --raw GET blob | head -c 1048576 | sha256sum | cut -d' ' -f1) == "$want" ]] ||
		fail "the 1 MiB value read back differs (sha256)"
	# the fixed workload above can pass between two sdpstat snapshots
	sdpstat_await redis-server 30 hold_conn "$REDIS_PORT" 3 'PING\r\n'
	stop_bg "$srv" TERM
	RATE=$(awk -F'"' '$2 == "GET" { printf "%.0f", $4 }' "$D/bench.csv") RATE_UNIT="GET/s"
	[[ -n $RATE ]] || fail "no GET rate in the benchmark's output"
	printf '    redis-benchmark: %s\n' "$(awk -F'"' 'NR > 1 { printf "%s %s/s  ", $2, $4 }' "$D/bench.csv")"
}
