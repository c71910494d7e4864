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
// a bulk sender sometimes stalls until a timer ends its wait (one run in
// three or four of BenchmarkSharedMemory's 64 KiB and 1 MiB sends with its
// rings made that small, a 60-100 ms stall each); over rings of 1 MiB it
// was not seen in 15 runs. The data arrives whole either way. Not yet
// understood: a strace of one stall shows the sending thread busy without
// a system call while the receiver sleeps.
