# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# haproxy (HTTP mode, default buffers) in front of python3 http.server; curl fetches a 2 MiB
# file through it 20 times (sha256 each): a proxy between two connections, both over SDP when
# everything is preloaded. The rate is responses per second.
haproxy_LABEL="curl ↔ haproxy (HTTP) ↔ python3 http.server, 2 MiB responses"
haproxy_MIXED=client

haproxy_version() {
	haproxy -v | head -n 1 | cut -d' ' -f1-3
}

haproxy_run() {
	local bport port
	bport=$(app_port)
	port=$(app_port)
	[[ $port != "$bport" ]] || port=$(app_port)
	head -c $((2 * 1024 * 1024)) "$WORK/data/100M.bin" >"$D/2M.bin"
	local want
	want=$(sha "$D/2M.bin")
	bg "$D/backend.out" "${SRV[@]}" "$PYTHON" -m http.server --bind 127.0.0.1 --directory "$D" "$bport"
	local backend=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$backend" $(listen_ports "$bport") || return 1
	haproxy_http_cfg "$D/haproxy.cfg" "$port" "$bport"
	bg "$D/server.out" "${SRV[@]}" haproxy -f "$D/haproxy.cfg" -db
	local proxy=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$proxy" $(listen_ports "$port") || return 1
	local i t total=0 rc
	for i in $(seq 1 20); do
		rc=0
		t=$(timeout -k 3 60 env "${CLI[@]}" curl -sS --fail --noproxy '*' -o "$D/got.bin" \
			-w '%{time_total}' "http://127.0.0.1:$port/2M.bin") || rc=$?
		((rc == 0)) || { fail "curl exited with $rc (response $i)"; break; }
		[[ $(sha "$D/got.bin") == "$want" ]] || { fail "response $i differs (sha256)"; break; }
		total=$(awk -v a="$total" -v b="$t" 'BEGIN { print a + b }')
	done
	rm -f "$D/got.bin"
	stop_bg "$proxy" TERM
	stop_bg "$backend" INT
	RATE=$(awk -v t="$total" 'BEGIN { if (t > 0) printf "%.0f", 20 / t; else print 0 }') RATE_UNIT=responses/s
}
