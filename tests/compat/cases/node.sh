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
	node_echo node
}

# node_echo NODE: the echo workload with the node binary NODE.
node_echo() {
	local node=$1 port
	port=$(app_port)
	bg "$D/server.out" "${SRV[@]}" "$node" "$here/echo.js" server "$port" 4
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 30 "$srv" $(listen_ports "$port") || return 1
	local rc=0
	timeout -k 3 60 env "${CLI[@]}" "$node" "$here/echo.js" client "$port" "$WORK/data/32M.bin" \
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

# Node.js 22 and 24 (scripts/install-deps.sh installs them into /opt/libsdp-node): libuv 1.51
# and 1.52 register their epoll events through io_uring, which the shim sees through syscall().
# The echo with node's own client, then an http server answering curl 20 times with 1 MiB (the
# size and sha256 of each response checked); the rate is responses per second, one curl
# process each.
NODE22=/opt/libsdp-node/22.23.3/bin/node
NODE24=/opt/libsdp-node/24.21.0/bin/node
node22_LABEL="node 22 net echo, http server ↔ curl (1 MiB)"
node22_MIXED=client
node24_LABEL="node 24 net echo, http server ↔ curl (1 MiB)"
node24_MIXED=client

node22_version() {
	echo "node $("$NODE22" --version)"
}

node24_version() {
	echo "node $("$NODE24" --version)"
}

node22_run() {
	node_echo "$NODE22" && node_http "$NODE22"
}

node24_run() {
	node_echo "$NODE24" && node_http "$NODE24"
}

# node_http NODE: 20 requests of 1 MiB from curl to an http server run by NODE.
node_http() {
	local node=$1 port size=$((1024 * 1024)) n=20
	port=$(app_port)
	"$node" -e "const b=Buffer.alloc($size);for(let i=0;i<$size;i++)b[i]=(i*7+(i>>8))&255;process.stdout.write(b)" \
		>"$D/want.bin"
	local want
	want=$(sha "$D/want.bin")
	bg "$D/http.out" "${SRV[@]}" "$node" "$here/http.js" "$port" "$size" "$n"
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 30 "$srv" $(listen_ports "$port") || return 1
	local i t total=0 rc
	for i in $(seq 1 "$n"); do
		rc=0
		t=$(timeout -k 3 30 env "${CLI[@]}" curl -sS --fail --noproxy '*' -o "$D/got.bin" -w '%{time_total}' \
			"http://127.0.0.1:$port/") || rc=$?
		((rc == 0)) || { fail "curl exited with $rc (request $i)"; break; }
		[[ $(sha "$D/got.bin") == "$want" ]] || { fail "response $i differs (sha256)"; break; }
		total=$(awk -v a="$total" -v b="$t" 'BEGIN { print a + b }')
	done
	rm -f "$D/got.bin"
	for i in $(seq 1 200); do
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$srv" 2>/dev/null && { stop_bg "$srv" TERM; fail "node http server still running after $n requests"; }
	RATE=$(awk -v t="$total" -v n="$n" 'BEGIN { if (t > 0) printf "%.0f", n / t; else print 0 }') RATE_UNIT=responses/s
}
