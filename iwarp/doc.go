// Package iwarp implements the wire formats of the iWARP protocol suite as
// it runs over an ordinary TCP byte stream:
//
//   - MPA, Marker PDU Aligned framing (RFC 5044, updated by RFC 6581): the
//     Request/Reply frames that start a connection, and the FPDUs of Full
//     Operation with their ULPDU_Length, PAD, CRC32c and optional markers.
//   - DDP, Direct Data Placement (RFC 5041): tagged and untagged segment
//     headers.
//   - RDMAP, Remote Direct Memory Access Protocol (RFC 5040, with Immediate
//     Data from RFC 7306): opcodes, the Read Request header and Terminate.
//
// The framing code is pure: it turns byte slices into byte slices and keeps
// only the per-direction stream position that markers need. It performs no
// I/O. Headers are typed byte-slice views with named accessors and Encode
// functions; the FPDU paths (TxFramer.AppendFPDU and RxDeframer.Next) do not
// allocate.
//
// QP runs them over a kernel TCP socket: send queue with coalescing
// (AppendSend), untagged reassembly (NextMessage), RDMA Write/Read with
// memory protection (mem.go), tagged payload read straight into its region
// (direct.go), MPA revision 2 ready-to-receive (rtr.go). CRC32C uses AVX-512
// carry-less multiplication where the CPU has it (crc_amd64.s).
//
// Incomplete input is reported as ErrNeedMore, which is not a protocol fault.
// Every protocol fault is an *Error that carries the Terminate layer, error
// type and error code of RFC 5040 §4.8 / RFC 6581 §8, so the caller can send
// a Terminate message (see TerminateFor) and close the stream.
package iwarp
