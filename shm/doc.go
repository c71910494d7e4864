// Package shm is the memory of the same-host transport: two preloaded
// processes on one host exchange SDP's messages through rings in a shared
// memory region instead of through kernel TCP.
//
// A Region is one memfd, sealed against shrinking and growing before it
// leaves the process that made it, holding two rings, one per direction
// (region.go). A ring (ring.go) carries records (a length and the bytes of
// one message) from its one Producer to its one Consumer. Both ends keep
// their own position privately and publish it with an atomic store; the
// other end reads it, checks it and never trusts more than it checked: the
// peer may be hostile or may die in the middle of a write, and what it can
// do to the shared memory costs at most this connection (ErrCorrupt).
//
// Waking is left to the caller: the ring only says when to wake the other
// end (Publish and Release report it) and lets an end announce that it is
// about to sleep (Consumer.Sleep, Producer.WaitRoom) without a wake-up
// being lost in between, so that a busy pair makes no system call per
// message.
package shm
