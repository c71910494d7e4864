package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"libsdp/internal/settings"
)

// A test-only fault: SDP_TEST_PANIC=<op>:<n> makes the n-th call of op on a
// connection panic inside the engine, so that tests can check that a panic
// costs one connection an error and the program lives. op is send, recv,
// poll or any. Read once, when the engine is loaded; unset, it costs one
// atomic load per call.

// callKind is the kind of entry point a call came through. Each entry point
// names its own kind when it looks its connection up: the shim sends
// through sdp_sendv_flags when the engine has it and sdp_sendv otherwise,
// and both must count as send.
type callKind uint32

const (
	callOther callKind = iota // shutdown, query, the cancels: only "any" counts them
	callSend                  // sdp_sendv, sdp_sendv_flags
	callRecv                  // sdp_recvv
	callPoll                  // sdp_poll
	callAny                   // SDP_TEST_PANIC=any: every call counts
)

var faultKinds = map[string]callKind{"send": callSend, "recv": callRecv, "poll": callPoll, "any": callAny}

var (
	faultKind  atomic.Uint32 // the callKind that counts
	faultAfter atomic.Int64  // calls of that kind left before the panic; 0: disarmed
)

func init() {
	spec := os.Getenv(settings.TestPanic.Name)
	if spec == "" {
		return
	}
	op, count, ok := strings.Cut(spec, ":")
	n, err := strconv.Atoi(count)
	kind, known := faultKinds[op]
	if !ok || err != nil || n < 1 || !known {
		fmt.Fprintf(os.Stderr, "libsdp: SDP_TEST_PANIC=%s is not <send|recv|poll|any>:<n>; ignored\n", spec)
		return
	}
	armFault(kind, n)
}

func armFault(kind callKind, n int) {
	faultKind.Store(uint32(kind))
	faultAfter.Store(int64(n))
}

// injectFault panics on the chosen call. lookup calls it with the kind of
// the entry point that is looking its connection up.
func injectFault(fd int, kind callKind) {
	if faultAfter.Load() <= 0 {
		return
	}
	if k := callKind(faultKind.Load()); k != callAny && k != kind {
		return
	}
	if faultAfter.Add(-1) == 0 {
		panic(fmt.Sprintf("injected fault (SDP_TEST_PANIC) on fd %d", fd))
	}
}
