package main

/*
#include "abi.h"

static int call_urgent(int (*f)(int), int fd) { return f ? f(fd) : 1; }
*/
import "C"

import (
	"sync"

	"libsdp/sdpcore"
)

// SIGURG for urgent data: sdpcore reports each new urgent mark with the
// connection locked, and the shim notes it (struct sdp_engine_config's
// urgent). An application thread inside the engine sends the signal on its
// way out; when none is inside (async progress found the mark), the
// urgentLoop goroutine asks the shim to send it, once nothing is locked.

var (
	urgentFn *[0]byte
	urgOnce  sync.Once
	urgKick  = make(chan struct{}, 1)
)

// setUrgent installs the shim's callback.
func setUrgent(fn *[0]byte) {
	if fn == nil {
		return
	}
	urgentFn = fn
	urgOnce.Do(func() {
		sdpcore.OnUrgent = noteUrgent
		go urgentLoop()
	})
}

// noteUrgent is sdpcore.OnUrgent.
func noteUrgent(fd int) {
	if C.call_urgent(urgentFn, C.int(fd)) != 0 {
		select {
		case urgKick <- struct{}{}:
		default:
		}
	}
}

func urgentLoop() {
	for range urgKick {
		C.call_urgent(urgentFn, -1)
	}
}
