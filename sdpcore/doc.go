// Package sdpcore implements the Sockets Direct Protocol on top of an RDMA
// transport (Transport; package iwarp's QP provides one): SDP messages (BSDH
// and its extension headers), the Hello/HelloAck exchange carried in the
// transport's setup messages (MPA private data), buffer-copy data transfer with
// credit-based flow control, and orderly or abortive close.
//
// A Conn is driven by its callers: every operation is non-blocking and, when
// it cannot finish, says which kernel readiness (readable or writable socket)
// and which deadline would let it make progress. The caller (the preload
// engine's C ABI, or a test) does the waiting.
package sdpcore
