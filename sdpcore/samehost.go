package sdpcore

// Same host: a connection between two processes on one host may carry its
// messages over a stream in shared memory (package shm) instead of its TCP
// socket (NewActiveStream, NewPassiveStream). The setup exchange still
// crosses the socket; from its end on, both directions use the stream, and
// the socket carries only the stream's doorbells and the connection's
// ends (a peer's close or reset, learnt after the stream is read to its
// end). The iWARP framing is the same over both, so every flow control,
// buffering and progress mode, zero copy and urgent data work unchanged.
//
// Waiting for room to send is waiting for the socket to become readable:
// the peer rings when it frees ring space (roomEvent).
//
// Known: over rings of 64 KiB (about one FPDU of loopback's segment size)
// a bulk sender and its receiver sometimes both wait 60-100 ms (one run in
// three or four of BenchmarkSharedMemory's 64 KiB and 1 MiB sends with its
// rings made that small; not seen in 15 runs with rings of 1 MiB). A
// snapshot of one such wait: the sender had counted the doorbell it wrote,
// the receiver's socket still held nothing, and 20 ms later it held the
// byte. The kernel's delivery of a one-byte segment over loopback was late
// (most likely its deferred network processing waiting for a CPU; not
// proved), and every full ring is one more doorbell to wait for. The data arrives whole either way. A
// doorbell that is not a TCP segment (an eventfd passed at the rendezvous,
// beside the socket in the shim's poll) would not wait for it.
