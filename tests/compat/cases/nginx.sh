# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# nginx, a master and 2 workers (accept_mutex off: the workers wait on the listener with
# EPOLLEXCLUSIVE), sendfile on: curl downloads a 100 MiB file (sha256), wrk requests a
# small page over 8 connections for 3 s (every response must be 200), and ab makes 5000
# connections, 8 at a time, one request each (no keep-alive: nginx closes each connection while
# it is still in its epoll set); no worker may die.
nginx_LABEL="nginx (2 workers, EPOLLEXCLUSIVE, sendfile) ↔ curl, wrk, ab"
nginx_MIXED=server
nginx_SDPSTAT=nginx

nginx_version() {
	nginx -v 2>&1 | sed 's/.*version: //'
}

nginx_run() {
	local port
	port=$(app_port)
	mkdir -p "$D/www" "$D/tmp"
	ln -s "$WORK/data/100M.bin" "$D/www/100M.bin"
	head -c 4096 "$WORK/data/32M.bin" | base64 >"$D/www/index.html"
	chmod -R a+rwX "$D/tmp" "$D/www"
	cat >"$D/nginx.conf" <<CONF
worker_processes 2;
user nobody nogroup;
pid $D/nginx.pid;
error_log $D/error.log info;
events {
	use epoll;
	accept_mutex off;
	worker_connections 256;
}
http {
	access_log off;
	sendfile on;
	keepalive_requests 100000;
	client_body_temp_path $D/tmp/body;
	proxy_temp_path $D/tmp/proxy;
	fastcgi_temp_path $D/tmp/fastcgi;
	uwsgi_temp_path $D/tmp/uwsgi;
	scgi_temp_path $D/tmp/scgi;
	server {
		listen 127.0.0.1:$port;
		root $D/www;
	}
}
CONF
	bg "$D/server.out" "${SRV[@]}" nginx -p "$D" -c "$D/nginx.conf" -g 'daemon off; master_process on;'
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$srv" $(listen_ports "$port") || return 1
	local workers i
	for i in $(seq 1 100); do
		workers=$(pgrep -c -P "$srv" nginx || true)
		((workers >= 2)) && break
		sleep 0.05
	done
	((workers == 2)) || fail "nginx runs $workers worker(s), wanted 2"

	local rc=0 speed
	speed=$(timeout -k 3 60 env "${CLI[@]}" curl -sS --fail --noproxy '*' -o "$D/got.bin" \
		-w '%{speed_download}' "http://127.0.0.1:$port/100M.bin") || rc=$?
	((rc == 0)) || fail "curl exited with $rc"
	[[ $(sha "$D/got.bin" 2>/dev/null) == "$SHA100" ]] || fail "the 100 MiB download differs (sha256)"
	rm -f "$D/got.bin"
	rc=0
	timeout -k 3 30 env "${CLI[@]}" wrk -t 2 -c 8 -d 3s "http://127.0.0.1:$port/index.html" \
		>"$D/wrk.out" 2>&1 || rc=$?
	((rc == 0)) || fail "wrk exited with $rc: $(tail -c 300 "$D/wrk.out")"
	grep -q 'Non-2xx\|Socket errors' "$D/wrk.out" && fail "wrk: $(grep 'Non-2xx\|Socket errors' "$D/wrk.out")"
	local reqs
	reqs=$(awk '$2 == "requests" && $3 == "in" { print $1 }' "$D/wrk.out")
	((${reqs:-0} > 0)) || fail "wrk completed no request"
	rc=0
	timeout -k 3 60 env "${CLI[@]}" ab -q -n 5000 -c 8 "http://127.0.0.1:$port/index.html" \
		>"$D/ab.out" 2>&1 || rc=$?
	((rc == 0)) || fail "ab exited with $rc: $(tail -c 300 "$D/ab.out")"
	local done_ failed
	done_=$(awk '$1 == "Complete" && $2 == "requests:" { print $3 }' "$D/ab.out")
	failed=$(awk '$1 == "Failed" && $2 == "requests:" { print $3 }' "$D/ab.out")
	[[ $done_ == 5000 && $failed == 0 ]] || fail "ab: ${done_:-no} complete, ${failed:-?} failed requests"
	grep -q 'exited on signal' "$D/error.log" && fail "nginx: $(grep -m 1 'exited on signal' "$D/error.log")"
	# the fixed workload above can pass between two sdpstat snapshots
	sdpstat_await nginx 30 hold_conn "$port" 3 'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n'
	# SIGQUIT: graceful shutdown, the workers exit normally (and print their statistics)
	stop_bg "$srv" QUIT
	RATE=$(awk '$1 == "Requests/sec:" { printf "%.0f", $2 }' "$D/wrk.out") RATE_UNIT="req/s"
	printf '    curl 100 MiB: %.0f MB/s; wrk: %s requests, %s req/s; ab, a connection per request: %s req/s\n' \
		"$(awk -v s="${speed:-0}" 'BEGIN { print s / 1e6 }')" "$reqs" "$RATE" \
		"$(awk '$1 == "Requests" && $2 == "per" { printf "%.0f", $4 }' "$D/ab.out")"
}
