package main

import (
	"os"
	"runtime"
	"sync"
)

// The engine's Ps. An application thread keeps a P of the engine's runtime
// between its calls (a cgo callback returns to C as into a system call).
// A thread that calls in while every P is kept by another one waits until
// the runtime's monitor takes a P back from a thread that has been out of
// the engine longest: up to one of the monitor's sleeps, which the engine's
// timer slack makes up to 1 ms long (shim/engine.c, ENGINE_TIMER_SLACK_NS).
// With one P for each application thread that uses the engine and one for
// the engine's goroutines, no call waits for a P. The runtime's default
// (the CPUs) already leaves one idle while fewer threads than CPUs use the
// engine, as in most clients: Ps are added only when the threads need them,
// for the change stops the world (0.03-0.4 ms, 7 ms once) and had a fresh
// process's first connection share its CPU with that and a new thread.

// maxProcs bounds the Ps: a garbage collection's dedicated mark workers are
// a quarter of them.
const maxProcs = 64

var procs struct {
	sync.Mutex
	fixed   bool // GOMAXPROCS set by the user: the engine keeps it
	base    int  // the runtime's default (the CPUs)
	threads int  // the most application threads using the engine at once, so far
}

// initProcs notes the runtime's default; threadsUsing adds Ps beside the
// caller once the application's threads leave none idle.
func initProcs() {
	procs.Lock()
	defer procs.Unlock()
	if os.Getenv("GOMAXPROCS") != "" {
		procs.fixed = true
		return
	}
	procs.base = runtime.GOMAXPROCS(0)
	// Setting the value it has stops nothing; it makes the Ps the engine's
	// own, so that the runtime's periodic update (CPU affinity and cgroup
	// limits, read again while it runs) never takes them under the threads.
	runtime.GOMAXPROCS(procs.base)
}

// threadsUsing records that n application threads use the engine at once
// (the shim counts them) and adds Ps beside the caller when they need them.
func threadsUsing(n int) {
	procs.Lock()
	defer procs.Unlock()
	if procs.fixed || n <= procs.threads {
		return
	}
	procs.threads = n
	if procsWanted() > runtime.GOMAXPROCS(0) {
		go applyProcs()
	}
}

// procsWanted is the Ps the engine wants now; procs is held.
func procsWanted() int { return min(max(procs.base, procs.threads+1), maxProcs) }

// applyProcs grows the Ps to what is wanted (never shrinks them: a thread
// that has ended may be followed by another).
func applyProcs() {
	procs.Lock()
	defer procs.Unlock()
	if want := procsWanted(); want > runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(want)
		logf(levelDebug, "runtime: %d Ps for %d application threads using the engine", want, procs.threads)
	}
}
