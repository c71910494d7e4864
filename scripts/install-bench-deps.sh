#!/usr/bin/env bash
# Installs what `make bench` needs beyond `make deps`: matplotlib for the plots, perf for
# cache-miss counts and profiles, NetPIPE and sockperf as third-party cross-checks, iproute2
# for the network namespaces. Idempotent and non-interactive; not part of `make test`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

# file or command that proves a package is present  →  Debian package that provides it
declare -A need=(
	[/usr/lib/python3/dist-packages/matplotlib]=python3-matplotlib
	[/usr/bin/python3]=python3
	[gcc]=gcc
	[ip]=iproute2
	[NPtcp]=netpipe-tcp
	[sockperf]=sockperf
	[perf]=linux-perf
	[ab]=apache2-utils
	[/usr/sbin/nginx]=nginx
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

if ((${#missing[@]} == 0)); then
	info "all benchmark dependencies present"
	exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
[[ $(id -u) -eq 0 ]] || die "missing packages (${missing[*]}) and not root: install them, then re-run"
info "installing Debian packages: ${missing[*]}"

# Keep services from starting while packages install (invoke-rc.d asks policy-rc.d).
created_policy=0
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	created_policy=1
fi
remove_policy() {
	if ((created_policy)); then
		rm -f /usr/sbin/policy-rc.d
	fi
}
trap remove_policy EXIT

export DEBIAN_FRONTEND=noninteractive
apt-get -q -o DPkg::Lock::Timeout=300 update
apt-get install -y -q --no-install-recommends \
	-o DPkg::Lock::Timeout=300 \
	-o Dpkg::Options::=--force-confdef \
	-o Dpkg::Options::=--force-confold \
	"${missing[@]}"
