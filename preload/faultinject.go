package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
)

// A test-only fault: SDP_TEST_PANIC=<op>:<n> makes the n-th call of op on a
// connection panic inside the engine, so that tests can check that a panic
// costs one connection an error and the program lives. op is send, recv,
// poll or any. Read once, when the engine is loaded; unset, it costs one
// atomic load per call.

var (
	faultOp    atomic.Pointer[string]
	faultAfter atomic.Int64 // calls of op left before the panic; 0: disarmed
)

func init() {
	spec := os.Getenv("SDP_TEST_PANIC")
	if spec == "" {
		return
	}
	op, count, ok := strings.Cut(spec, ":")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || n < 1 || (op != "send" && op != "recv" && op != "poll" && op != "any") {
		fmt.Fprintf(os.Stderr, "libsdp: SDP_TEST_PANIC=%s is not <send|recv|poll|any>:<n>; ignored\n", spec)
		return
	}
	faultOp.Store(&op)
	faultAfter.Store(int64(n))
}

// injectFault panics on the chosen call. It is called from lookup, so the
// caller's caller names the operation (sdp_sendv, sdp_recvv, sdp_poll).
func injectFault(fd int) {
	if faultAfter.Load() <= 0 {
		return
	}
	if op := *faultOp.Load(); op != "any" {
		pcs := make([]uintptr, 4)
		frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
		want := map[string]string{"send": "main.sdp_sendv", "recv": "main.sdp_recvv", "poll": "main.sdp_poll"}[op]
		found := false
		for f, more := frames.Next(); ; f, more = frames.Next() {
			found = found || f.Function == want
			if !more {
				break
			}
		}
		if !found {
			return
		}
	}
	if faultAfter.Add(-1) == 0 {
		panic(fmt.Sprintf("injected fault (SDP_TEST_PANIC) on fd %d", fd))
	}
}
