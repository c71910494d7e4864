#!/usr/bin/env bash
# Builds build/libsdp_<version>_<arch>.deb from the tree (make deb) and checks it with lintian.
#
# The package is assembled with dpkg-dev's tools (dpkg-shlibdeps, dpkg-gencontrol, dpkg-deb) from
# `make install` into a staging tree, with the packaging files of packaging/deb/. Not with
# dpkg-buildpackage: it writes its results into the directory above the source tree, and Go
# comes from /usr/local/go, which no Debian build dependency can name.
#
# Layout: the libraries in /usr/lib/<multiarch triplet> (the loader finds LD_PRELOAD=libsdp.so
# there by name, and the shim loads libsdp-engine.so from beside itself), sdp_run and sdpstat
# in /usr/bin, the example rules file, copyright and changelog in /usr/share/doc/libsdp. No
# /etc/libsdp.conf: a rules file there changes every preloaded program.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

require_cmd dpkg-architecture dpkg-parsechangelog dpkg-shlibdeps dpkg-gencontrol dpkg-deb strip gzip lintian
require_build
cd "$LIBSDP_ROOT"

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
version=$(dpkg-parsechangelog -l packaging/deb/changelog -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb=build/libsdp_${version}_${arch}.deb

# dpkg-gencontrol and dpkg-shlibdeps read debian/control and debian/changelog in the current
# directory and take the package's files from debian/<package>: build/deb is that directory.
work=$LIBSDP_ROOT/build/deb
pkg=$work/debian/libsdp
rm -rf "$work" "$deb"
mkdir -p "$work/debian"
cp packaging/deb/control packaging/deb/changelog "$work/debian/"

make --no-print-directory install DESTDIR="$pkg" PREFIX=/usr LIBDIR="/usr/lib/$multiarch" >/dev/null

doc=$pkg/usr/share/doc/libsdp
install -m 0644 packaging/deb/copyright "$doc/copyright"
# A native package's changelog is changelog.gz; -n leaves the name and time stamp out of the
# compressed files, as Debian asks (lintian: package-contains-timestamped-gzip).
gzip -9n <packaging/deb/changelog >"$doc/changelog.gz"
gzip -9n "$pkg"/usr/share/man/man1/*.1
chmod 0644 "$doc/changelog.gz" "$pkg"/usr/share/man/man1/*.1.gz
install -D -m 0644 packaging/deb/lintian-overrides "$pkg/usr/share/lintian/overrides/libsdp"

# Stripped as dh_strip would (the debugging symbols are in build/ for whoever needs them).
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
	"$pkg/usr/lib/$multiarch/libsdp.so" "$pkg/usr/lib/$multiarch/libsdp-engine.so"
strip --remove-section=.comment "$pkg/usr/bin/sdpstat"

mkdir -p "$pkg/DEBIAN"
# The loader's cache is rebuilt after install and removal, so LD_PRELOAD=libsdp.so finds the
# library by name at once.
printf 'activate-noawait ldconfig\n' >"$pkg/DEBIAN/triggers"
chmod 0644 "$pkg/DEBIAN/triggers"

(
	cd "$work"
	dpkg-shlibdeps -Tdebian/libsdp.substvars "debian/libsdp/usr/lib/$multiarch/libsdp.so" \
		"debian/libsdp/usr/lib/$multiarch/libsdp-engine.so" debian/libsdp/usr/bin/sdpstat
	dpkg-gencontrol -plibsdp -Pdebian/libsdp -Tdebian/libsdp.substvars
)
(
	cd "$pkg"
	find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum >DEBIAN/md5sums
)
chmod 0644 "$pkg/DEBIAN/md5sums" "$pkg/DEBIAN/control"

dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
info "built $deb"
dpkg-deb --info "$deb" | sed -n 's/^ *\(Package\|Version\|Architecture\|Depends\|Installed-Size\):/  &/p'

# lintian's errors fail the build; its warnings are printed. What it reports that cannot be
# fixed is overridden, with the reason, in packaging/deb/lintian-overrides.
info "lintian $deb"
lintian --fail-on error --display-info --show-overrides "$deb"
