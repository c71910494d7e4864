# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# PostgreSQL, a backend forked per connection, cluster created under the run's directory by
# the unprivileged user nobody: pgbench -i, then 4 clients x 200 transactions (the history
# must account for every balance), and psql reading a 20 MB result (sha256 against the same
# rows computed here).
postgres_LABEL="postgresql ↔ pgbench, psql"
postgres_MIXED=server
postgres_SDPSTAT=postgres

PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)

postgres_version() {
	"$PG_BIN/postgres" --version
}

postgres_as() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
}

postgres_run() {
	local port
	port=$(app_port)
	mkdir -p "$D/pg"
	chown nobody:nogroup "$D/pg"
	postgres_as "$PG_BIN/initdb" -D "$D/pg" -A trust -U postgres --no-sync >"$D/initdb.out" 2>&1 ||
		{ fail "initdb failed: $(tail -n 3 "$D/initdb.out")"; return 1; }
	bg "$D/server.out" setpriv --reuid=nobody --regid=nogroup --clear-groups env "${SRV[@]}" \
		"$PG_BIN/postgres" -D "$D/pg" -p "$port" -k "$D/pg" -c listen_addresses=127.0.0.1 \
		-c fsync=off -c shared_buffers=16MB
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 30 "$srv" $(listen_ports "$port") || return 1
	local conn=(-h 127.0.0.1 -p "$port" -U postgres) rc=0
	timeout -k 3 60 env "${CLI[@]}" pgbench -i -s 1 -q "${conn[@]}" postgres >"$D/init.out" 2>&1 || rc=$?
	((rc == 0)) || fail "pgbench -i exited with $rc: $(tail -n 3 "$D/init.out")"
	rc=0
	timeout -k 3 120 env "${CLI[@]}" pgbench -c 4 -j 2 -t 200 "${conn[@]}" postgres >"$D/bench.out" 2>&1 || rc=$?
	((rc == 0)) || fail "pgbench exited with $rc: $(tail -n 3 "$D/bench.out")"
	local check
	check=$(timeout -k 3 30 env "${CLI[@]}" psql -X -At "${conn[@]}" -c \
		"select (select sum(abalance) from pgbench_accounts) = (select sum(delta) from pgbench_history), (select count(*) from pgbench_history)" postgres 2>&1)
	[[ $check == "t|800" ]] || fail "after pgbench: balances and history disagree or not 800 transactions ($check)"
	local got want
	got=$(timeout -k 3 60 env "${CLI[@]}" psql -X -At "${conn[@]}" -c \
		"select repeat(md5(g::text), 32) from generate_series(1, 20000) g" postgres | sha256sum | cut -d' ' -f1)
	want=$("$PYTHON" -c '
import hashlib
h = hashlib.sha256()
for g in range(1, 20001):
    h.update((hashlib.md5(str(g).encode()).hexdigest() * 32 + "\n").encode())
print(h.hexdigest())')
	[[ $got == "$want" ]] || fail "psql: the 20 MB result differs (sha256)"
	# The work above can pass between two sdpstat snapshots: a session held for 3 s, until one
	# has shown the server's SDP sockets. Not 1 s: a backend publishes its sockets 0.5 s after
	# its engine starts, and on a loaded machine one snapshot (sdpstat, then the processes'
	# ancestry read from /proc) takes most of a second, so a backend of a 1 s session was gone
	# before its ancestry was read and did not count as the server's.
	sdpstat_await postgres 30 timeout -k 3 10 env "${CLI[@]}" psql -X -At "${conn[@]}" -c "select pg_sleep(3)" postgres
	# SIGINT: fast shutdown
	stop_bg "$srv" INT 20
	RATE=$(awk '/^tps = / { printf "%.0f", $3 }' "$D/bench.out") RATE_UNIT="tps"
}
