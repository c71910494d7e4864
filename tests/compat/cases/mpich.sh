# shellcheck shell=bash disable=SC2034 # the framework reads these variables by name
# MPI: mpich's mpiexec (hydra) starts 2 ranks of NetPIPE's NPmpich2 on this host, with UCX
# limited to TCP over loopback (UCX_TLS=tcp,self: no shared memory), first in NetPIPE's
# integrity mode, then the bandwidth sweep. "server" is rank 0 and "client" rank 1: in the
# mixed run only rank 0 is preloaded.
mpich_LABEL="mpiexec -n 2 NPmpich2 (mpich, UCX over TCP)"
mpich_MIXED=server
mpich_SDPSTAT=NPmpich2
# UCX also connects each rank to itself over TCP: in the mixed run, rank 0's connections to
# itself have libsdp at both ends and rightly use SDP; only those to rank 1 must be TCP.
mpich_SELF_SDP=1
# MPICH 4.0.2 with UCX's TCP transport sometimes hangs in MPI_Finalize, after NetPIPE's results
# are complete, over plain TCP without libsdp too (seen with three jobs at once): one rank waits
# in the final PMI barrier with UCX's last 25-byte message unread in its socket (in its engine
# with libsdp), the other spins in UCX progress waiting for the answer.

mpich_version() {
	echo "MPICH $(mpichversion 2>/dev/null | awk -F'\t' '/Version/ { print $NF }' | tr -d ' '), NetPIPE $(dpkg-query -W -f '${Version}' netpipe-mpich2 2>/dev/null)"
}

# mpich_env VAR=VALUE...: the same as hydra options (-env VAR VALUE); -u VAR says nothing.
mpich_env() {
	local kv
	for kv in "$@"; do
		[[ $kv == *=* ]] && printf '%s\n' -env "${kv%%=*}" "${kv#*=}"
	done
}

# mpich_job NAME ARGS...: both ranks run NPmpich2 ARGS.
mpich_job() {
	local name=$1
	shift
	local r0 r1
	mapfile -t r0 < <(mpich_env "${SRV[@]}")
	mapfile -t r1 < <(mpich_env "${CLI[@]}")
	# hydra itself (mpiexec, its proxy) is not preloaded, only the ranks; started like a
	# server so that sdpstat's samples are matched to its ranks
	bg "$D/$name.out" mpiexec.mpich -wdir "$D" -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES lo \
		-n 1 "${r0[@]}" NPmpich2 -u 1048576 -o "$D/$name.np" "$@" : \
		-n 1 "${r1[@]}" NPmpich2 -u 1048576 -o "$D/$name.np" "$@"
	local job=$BG_PID i rc=0
	for i in $(seq 1 1200); do
		kill -0 "$job" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$job" 2>/dev/null; then
		local rank
		for rank in $(pgrep -f "NPmpich2 -u 1048576 -o $D/$name.np"); do
			echo "rank $rank, sdpstat -p $rank:"
			"$SDPSTAT" -p "$rank" 2>&1 | cut -c1-200
		done >"$D/$name-hung.out"
		kill -KILL -- "-$job" 2>/dev/null
		wait "$job"
		# NetPIPE's last line is written before MPI_Finalize: the results are complete
		if grep -q '^ *[0-9]*: *1048579 bytes\|786433 bytes.*passed' "$D/$name.out"; then
			known_fail "mpiexec ($name): MPICH/UCX hang in MPI_Finalize after complete results (also over plain TCP without libsdp)"
		else
			fail "mpiexec ($name) still running after 60 s, results incomplete: $(tail -c 200 "$D/$name.out")"
		fi
		return
	fi
	wait "$job" || rc=$?
	((rc == 0)) || fail "mpiexec ($name) exited with $rc: $(tail -c 300 "$D/$name.out")"
}

mpich_run() {
	mpich_job integrity -i -n 10
	local passed failed
	passed=$(grep -c 'Integrity check passed' "$D/integrity.out")
	failed=$(grep -ci 'fail' "$D/integrity.out")
	((passed >= 30 && failed == 0)) || fail "NPmpich2 -i: $passed sizes passed the integrity check, $failed failed"
	mpich_job perf -n 50
	local sizes
	sizes=$(wc -l <"$D/perf.np" 2>/dev/null || echo 0)
	((sizes >= 60)) || fail "NPmpich2: only $sizes sizes measured"
	RATE=$(sort -k2 -g "$D/perf.np" | tail -n 1 | awk '{ printf "%.0f", $2 }') RATE_UNIT="Mbit/s (best)"
	printf '    NPmpich2: %s sizes checked, best %s Mbit/s\n' "$passed" "$RATE"
}
