//go:build race

package sdpcore

// raceEnabled: the race detector is on; its sync.Pool drops a part of what
// is put, at random, so counts of allocations that a pool saves are looser.
const raceEnabled = true
