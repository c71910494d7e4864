# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# socat TCP-LISTEN with fork, both directions: on one port each connection's child runs
# sha256sum over what the client uploads, on another each child sends a file the client
# downloads; three clients of each at once, 32 MiB each, checked by sha256.
socat_LABEL="socat (fork, upload and download)"
socat_MIXED=client
# (no sdpstat sample: its connections last well under a second, the exit lines count them)

socat_version() {
	socat -V | grep -m1 'socat version' | cut -d' ' -f2-3
}

socat_run() {
	local up down
	up=$(app_port)
	down=$(app_port)
	bg "$D/up.out" "${SRV[@]}" socat "TCP-LISTEN:$up,bind=127.0.0.1,reuseaddr,fork" SYSTEM:sha256sum
	local s1=$BG_PID
	bg "$D/down.out" "${SRV[@]}" socat -b 262144 "TCP-LISTEN:$down,bind=127.0.0.1,reuseaddr,fork" \
		"SYSTEM:cat $WORK/data/32M.bin"
	local s2=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$s1" $(listen_ports "$up") || return 1
	# shellcheck disable=SC2046
	wait_port 20 "$s2" $(listen_ports "$down") || return 1
	local i t0 t1 pids=()
	t0=$(date +%s.%N)
	for i in 1 2 3; do
		timeout -k 3 60 env "${CLI[@]}" socat -b 262144 -t 30 - "TCP:127.0.0.1:$up" \
			<"$WORK/data/32M.bin" >"$D/hash$i" 2>"$D/up$i.out" &
		pids+=($!)
		timeout -k 3 60 env "${CLI[@]}" socat -b 262144 -u "TCP:127.0.0.1:$down" - \
			>"$D/got$i.bin" 2>"$D/down$i.out" &
		pids+=($!)
	done
	local rc n=0
	for i in 1 2 3; do
		rc=0
		wait "${pids[$n]}" || rc=$?
		((rc == 0)) || fail "upload $i: socat exited with $rc: $(tail -c 200 "$D/up$i.out")"
		[[ $(cut -d' ' -f1 "$D/hash$i") == "$SHA32" ]] || fail "upload $i: the server's sha256 differs ($(head -c 64 "$D/hash$i"))"
		rc=0
		wait "${pids[$((n + 1))]}" || rc=$?
		((rc == 0)) || fail "download $i: socat exited with $rc: $(tail -c 200 "$D/down$i.out")"
		[[ $(sha "$D/got$i.bin") == "$SHA32" ]] || fail "download $i: different data (sha256, $(stat -c %s "$D/got$i.bin") bytes)"
		n=$((n + 2))
	done
	t1=$(date +%s.%N)
	rm -f "$D"/got*.bin
	stop_bg "$s1" TERM
	stop_bg "$s2" TERM
	# 3 uploads and 3 downloads of 32 MiB
	RATE=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", 6 * 32 * 1048576 / (b - a) / 1e6 }') RATE_UNIT=MB/s
}
