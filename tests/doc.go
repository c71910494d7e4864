// Package tests holds libsdp's end-to-end tests: unmodified programs (python3's http.server and
// curl) run under LD_PRELOAD=build/libsdp.so and talk to each other over SDP, or fall back to
// plain TCP when only one end runs libsdp.
//
// The tests need the built libraries (run `make` first), /usr/bin/python3 and curl
// (`make deps` installs them). They fail, never skip, when something is missing.
package tests
