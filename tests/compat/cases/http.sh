# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# curl downloads a 100 MiB file from python3 -m http.server; sha256 of the download.
http_LABEL="curl ↔ python3 http.server"
http_MIXED=client
# (no sdpstat sample: its connections last well under a second, the exit lines count them)

http_version() {
	printf '%s, %s\n' "$(curl --version | head -n 1 | cut -d' ' -f1-2)" "$("$PYTHON" --version)"
}

http_run() {
	local port
	port=$(app_port)
	bg "$D/server.out" "${SRV[@]}" "$PYTHON" -m http.server --bind 127.0.0.1 \
		--directory "$WORK/data" "$port"
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$srv" $(listen_ports "$port") || return 1
	local speed rc=0
	speed=$(timeout -k 3 60 env "${CLI[@]}" curl -sS --fail --noproxy '*' -o "$D/got.bin" \
		-w '%{speed_download}' "http://127.0.0.1:$port/100M.bin") || rc=$?
	((rc == 0)) || fail "curl exited with $rc"
	[[ $(sha "$D/got.bin" 2>/dev/null) == "$SHA100" ]] || fail "downloaded file differs (sha256)"
	rm -f "$D/got.bin"
	stop_bg "$srv" INT
	RATE=$(awk -v s="${speed:-0}" 'BEGIN { printf "%.0f", s / 1e6 }') RATE_UNIT=MB/s
}
