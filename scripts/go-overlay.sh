#!/usr/bin/env bash
# go-overlay.sh OUT_DIR: writes OUT_DIR/go-overlay.json, the -overlay the engine is built with
# (Makefile), and the one runtime file it replaces (in OUT_DIR/_go-overlay: a directory whose
# name starts with an underscore is no package of the module's to go vet and go test), rewriting
# them only when they change.
#
# Every call from a C thread into Go (each send, receive and look of the application's) goes
# through the runtime's cgocallbackg1, which waits for the library's initialisation by receiving
# from a channel that is closed once it is done (`<-main_init_done`). A blocking receive takes
# the channel's lock even when it is closed: a lock and an unlock on one global line per call,
# 6.5% of a 64-byte send's CPU, and a line that every thread calling the engine writes
# (golang/go#15943, filed in 2016 and since closed; Go 1.26.8 still receives so). The
# replacement tries a non-blocking receive first, which on a closed channel takes no lock, and
# blocks only before the initialisation is done, as the original does. If the file no longer
# holds that line exactly once (another Go), the overlay is empty and the engine is built from
# the runtime as it is.
set -euo pipefail
out=$1
go=${GO:-go}
root=$("$go" env GOROOT)
src=$root/src/runtime/cgocall.go
mkdir -p "$out/_go-overlay"
tmp=$(mktemp "$out/_go-overlay/.cgocall.XXXXXX")
json_tmp=$(mktemp "$out/.go-overlay.json.XXXXXX")
trap 'rm -f "$tmp" "$json_tmp"' EXIT
old=$'\t\t<-main_init_done'
dir=$(cd "$out/_go-overlay" && pwd)
# The paths go into JSON as they are: one with a quote or a backslash gets no overlay.
if [[ -r $src && $src$dir != *[\\\"]* ]] && (($(grep -cxF "$old" "$src") == 1)); then
	awk -v old="$old" '$0 == old {
		print "\t\tselect {"
		print "\t\tcase <-main_init_done:"
		print "\t\tdefault:"
		print "\t\t\t<-main_init_done"
		print "\t\t}"
		next
	} { print }' "$src" >"$tmp"
	chmod 644 "$tmp"
	cmp -s "$tmp" "$dir/cgocall.go" || mv "$tmp" "$dir/cgocall.go"
	printf '{"Replace":{"%s":"%s"}}\n' "$src" "$dir/cgocall.go" >"$json_tmp"
else
	echo "go-overlay.sh: $src has no single '<-main_init_done' line: the engine is built from the runtime as it is" >&2
	printf '{"Replace":{}}\n' >"$json_tmp"
fi
chmod 644 "$json_tmp"
cmp -s "$json_tmp" "$out/go-overlay.json" || mv "$json_tmp" "$out/go-overlay.json"
