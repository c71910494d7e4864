# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# A Java NIO echo (tests/compat/java/NioEcho.java): a selector-driven server with non-blocking
# channels that writes what it still holds, blocking, at a client's end of stream and closes;
# three clients at once, each with a second thread writing 64 MiB in one blocking loop and then
# shutdownOutput() while the main thread reads and checks every echoed byte. The rate is the
# echo's MB/s, summed over the clients.
java_LABEL="Java NIO echo (selector server, clients writing 64 MiB from a second thread)"
java_MIXED=client

java_version() {
	java -version 2>&1 | head -n 1
}

java_run() {
	local port
	port=$(app_port)
	mkdir -p "$D/classes"
	javac -d "$D/classes" "$LIBSDP_ROOT/tests/compat/java/NioEcho.java" >"$D/javac.out" 2>&1 ||
		{ fail "javac: $(tail -c 300 "$D/javac.out")"; return 1; }
	chmod -R a+rX "$D/classes"
	bg "$D/server.out" "${SRV[@]}" java -cp "$D/classes" NioEcho server "$port" 3
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 30 "$srv" $(listen_ports "$port") || return 1
	local i rc pids=()
	for i in 1 2 3; do
		timeout -k 3 120 env "${CLI[@]}" java -cp "$D/classes" NioEcho client "$port" $((64 << 20)) \
			>"$D/client$i.out" 2>&1 &
		pids+=($!)
	done
	local total=0
	for i in 1 2 3; do
		rc=0
		wait "${pids[$((i - 1))]}" || rc=$?
		((rc == 0)) || { fail "client $i exited with $rc: $(tail -c 300 "$D/client$i.out")"; continue; }
		local ok bytes ns
		read -r ok bytes ns < <(grep '^ok ' "$D/client$i.out")
		[[ $ok == ok && $bytes == $((64 << 20)) ]] || { fail "client $i: $(tail -c 300 "$D/client$i.out")"; continue; }
		total=$(awk -v t="$total" -v b="$bytes" -v n="$ns" 'BEGIN { print t + b / (n / 1e9) / 1e6 }')
	done
	# the server exits once its three connections have ended
	local deadline=$((SECONDS + 30))
	while kill -0 "$srv" 2>/dev/null && ((SECONDS < deadline)); do
		sleep 0.05
	done
	kill -0 "$srv" 2>/dev/null && fail "the server did not exit after its three connections"
	stop_bg "$srv" TERM
	RATE=$(awk -v t="$total" 'BEGIN { printf "%.0f", t }') RATE_UNIT=MB/s
}
