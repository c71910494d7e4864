package main

/*
#include "abi.h"

static void call_urgent(void (*f)(int, int), int fd, int self) { if (f) f(fd, self); }
*/
import "C"

import (
	"sync"
	"sync/atomic"

	"libsdp/sdpcore"
)

// SIGURG for urgent data. The engine finds a new urgent mark while it
// handles a connection's messages, with the connection locked; the shim
// sends the signal (shim_urgent) once nothing is locked: an application
// thread on its way out of the engine (the mark came in its call), or, in
// async progress, the urgentLoop goroutine while no application thread is
// inside the engine. A handler then never runs inside Go code: Go's
// threads block SIGURG (they inherit the mask the shim set around dlopen),
// and an application thread takes it either in the shim's C code or
// outside the engine; a handler may call recv(MSG_OOB) on the socket.

var (
	urgentFn *[0]byte
	inCalls  atomic.Int32 // application threads inside an engine call
	urgCount atomic.Int32 // len(urgFds), read without the lock
	urgMu    sync.Mutex
	urgFds   []int // descriptors with a new mark not yet signalled
	urgKick  = make(chan struct{}, 1)
	urgOnce  sync.Once
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

// enter counts an application thread into an engine call; guard counts it
// out (leave).
func enter(fd int) int {
	inCalls.Add(1)
	return fd
}

// leave ends an engine call: the thread signals the marks that came in.
func leave() {
	inCalls.Add(-1)
	if urgCount.Load() != 0 {
		deliverUrgent(true)
	}
}

// noteUrgent is sdpcore.OnUrgent: it runs with the connection locked.
func noteUrgent(fd int) {
	urgMu.Lock()
	urgFds = append(urgFds, fd)
	urgCount.Store(int32(len(urgFds)))
	urgMu.Unlock()
	if inCalls.Load() == 0 {
		select {
		case urgKick <- struct{}{}:
		default:
		}
	}
}

// urgentLoop signals marks that async progress found while no application
// thread was inside the engine; otherwise the threads inside do it.
func urgentLoop() {
	for range urgKick {
		if inCalls.Load() == 0 {
			deliverUrgent(false)
		}
	}
}

func deliverUrgent(self bool) {
	urgMu.Lock()
	fds := urgFds
	urgFds = nil
	urgCount.Store(0)
	urgMu.Unlock()
	s := C.int(0)
	if self {
		s = 1
	}
	for _, fd := range fds {
		C.call_urgent(urgentFn, C.int(fd), s)
	}
}
