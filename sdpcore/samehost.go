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
