# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# NetPIPE's NPtcp: its integrity mode (-i: every message checked, sizes up to 1 MiB), then
# the ping-pong over every size up to 1 MiB (100 round trips each); the rate is the best
# bandwidth of the sweep.
netpipe_LABEL="NPtcp (netpipe-tcp)"
netpipe_MIXED=client
netpipe_SDPSTAT=NPtcp

netpipe_version() {
	echo "NetPIPE $(dpkg-query -W -f '${Version}' netpipe-tcp 2>/dev/null)"
}

# netpipe_pair NAME ARGS...: a receiver and a transmitter with the same ARGS.
netpipe_pair() {
	local name=$1
	shift
	local port
	port=$(app_port)
	bg "$D/$name-recv.out" "${SRV[@]}" NPtcp -P "$port" "$@"
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$srv" $(listen_ports "$port") || return 1
	local rc=0
	(cd "$D" && timeout -k 3 60 env "${CLI[@]}" NPtcp -h 127.0.0.1 -P "$port" -u 1048576 -o "$D/$name.np" "$@") \
		>"$D/$name-send.out" 2>&1 || rc=$?
	((rc == 0)) || fail "NPtcp $name (transmitter) exited with $rc: $(tail -c 200 "$D/$name-send.out")"
	# the receiver ends by itself when the transmitter is done
	local i
	for i in $(seq 1 200); do
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.05
	done
	rc=0
	kill -0 "$srv" 2>/dev/null && fail "NPtcp $name (receiver) still running 10 s after the transmitter ended"
	wait "$srv" || rc=$?
	# NetPIPE's receiver ends with status 3 once the transmitter has closed, plain TCP too.
	((rc == 0 || rc == 3)) || fail "NPtcp $name (receiver) exited with $rc: $(tail -c 200 "$D/$name-recv.out")"
}

# netpipe_hold: one more pair, 1 KiB messages, with twice the round trips of the last one, for
# sdpstat_await: over shared memory the sweeps can end before the receiver's engine publishes its
# sockets for sdpstat (0.5 s after it starts), and a pair that runs longer each time is seen
# whatever the machine's speed.
netpipe_hold_reps=4000
netpipe_hold() {
	netpipe_pair hold -l 1024 -u 1024 -p 0 -n "$netpipe_hold_reps"
	netpipe_hold_reps=$((netpipe_hold_reps * 2))
}

netpipe_run() {
	netpipe_pair integrity -i -n 20
	local passed failed
	passed=$(grep -c 'Integrity check passed' "$D/integrity-send.out")
	failed=$(grep -ci 'fail' "$D/integrity-send.out")
	((passed >= 30 && failed == 0)) || fail "NPtcp -i: $passed sizes passed the integrity check, $failed failed"
	netpipe_pair perf -n 100
	local sizes
	sizes=$(wc -l <"$D/perf.np")
	((sizes >= 60)) || fail "NPtcp: only $sizes sizes measured"
	RATE=$(sort -k2 -g "$D/perf.np" | tail -n 1 | awk '{ printf "%.0f", $2 }') RATE_UNIT="Mbit/s (best)"
	sdpstat_await NPtcp 60 netpipe_hold
	printf '    NPtcp: %s sizes checked, best %s Mbit/s, 1 byte: %s µs one way\n' "$passed" "$RATE" \
		"$(awk 'NR == 1 { printf "%.1f", $3 * 1e6 / 2 }' "$D/perf.np")"
}
