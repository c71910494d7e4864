# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# sshd on a high port with its own host key and configuration (it accepts, dup2s the
# connection onto 0 and 1 and re-executes itself, then forks privilege-separated children),
# key authentication for root: ssh runs a remote command, scp uploads a 100 MiB file and ssh
# cat downloads it again (sha256 of both).
sshd_LABEL="sshd ↔ ssh, scp"
sshd_MIXED=server
sshd_SDPSTAT=sshd
# After the re-executed sshd has exchanged banners over the connection (the engine is loaded
# there), it forks the privilege-separated child that does the rest of the connection's I/O:
# a Go runtime does not survive fork, so the child cannot drive the SDP connection.
sshd_TCP_RULE="use tcp server sshd *:*"
UNSUPPORTED+=("sshd|sshd over SDP|the re-executed sshd talks on the connection (banner), then forks the privilege-separated child that carries on: the engine (a Go runtime) does not survive fork; with both ends preloaded, rule \`$sshd_TCP_RULE\` keeps sshd on TCP (row above)")

sshd_version() {
	ssh -V 2>&1 | cut -d, -f1
}

sshd_run() {
	local port
	port=$(app_port)
	mkdir -p /run/sshd
	ssh-keygen -q -t ed25519 -N '' -f "$D/hostkey" || { fail "ssh-keygen (host key) failed"; return 1; }
	ssh-keygen -q -t ed25519 -N '' -f "$D/userkey" || { fail "ssh-keygen (user key) failed"; return 1; }
	cp "$D/userkey.pub" "$D/authorized_keys"
	cat >"$D/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $D/hostkey
PidFile $D/sshd.pid
AuthorizedKeysFile $D/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel INFO
CONF
	bg "$D/server.out" "${SRV[@]}" /usr/sbin/sshd -D -e -f "$D/sshd_config"
	local srv=$BG_PID
	# shellcheck disable=SC2046
	wait_port 20 "$srv" $(listen_ports "$port") || return 1
	local opts=(-i "$D/userkey" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
		-o BatchMode=yes -o LogLevel=ERROR)
	local out rc=0
	out=$(timeout -k 3 30 env "${CLI[@]}" ssh "${opts[@]}" -p "$port" root@127.0.0.1 echo remote-ok 2>"$D/ssh.err") || rc=$?
	[[ $rc == 0 && $out == remote-ok ]] || fail "ssh echo: exit $rc, output '$out': $(tail -c 300 "$D/ssh.err")"
	local t0 t1
	t0=$(date +%s.%N)
	rc=0
	timeout -k 3 120 env "${CLI[@]}" scp -q "${opts[@]}" -P "$port" "$WORK/data/100M.bin" \
		"root@127.0.0.1:$D/up.bin" 2>"$D/scp.err" || rc=$?
	t1=$(date +%s.%N)
	((rc == 0)) || fail "scp exited with $rc: $(tail -c 300 "$D/scp.err")"
	[[ $(sha "$D/up.bin" 2>/dev/null) == "$SHA100" ]] || fail "the file scp uploaded differs (sha256)"
	rm -f "$D/up.bin"
	rc=0
	timeout -k 3 120 env "${CLI[@]}" ssh "${opts[@]}" -p "$port" root@127.0.0.1 cat "$WORK/data/100M.bin" \
		>"$D/down.bin" 2>"$D/down.err" || rc=$?
	((rc == 0)) || fail "ssh cat exited with $rc: $(tail -c 300 "$D/down.err")"
	[[ $(sha "$D/down.bin" 2>/dev/null) == "$SHA100" ]] || fail "the file ssh cat downloaded differs (sha256)"
	rm -f "$D/down.bin"
	stop_bg "$srv" TERM
	RATE=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", 100 * 1048576 / (b - a) / 1e6 }') RATE_UNIT="MB/s (scp)"
}
