package statsfile

// Field is one key of the engine's statistics line (the SDP_STATS exit
// line, and Process.Totals, which the engine parses from that line).
type Field struct {
	Name    string
	Meaning string
	// Setting marks a configuration value (a word), not a count.
	Setting bool
}

// LineFields are the keys of the engine's statistics line, in its order.
// The line's format string (preload) and the interposer's all-zero line,
// printed when the engine is not loaded (shim/exec.c), must agree with this
// list; preload's tests check both.
var LineFields = []Field{
	{Name: "sdp_conns", Meaning: "connections that ran over SDP"},
	{Name: "fpdus_tx", Meaning: "MPA FPDUs sent"},
	{Name: "fpdus_rx", Meaning: "MPA FPDUs received"},
	{Name: "markers_tx", Meaning: "MPA markers sent"},
	{Name: "markers_rx", Meaning: "MPA markers received"},
	{Name: "crc_bytes_rx", Meaning: "received octets run through CRC32C"},
	{Name: "crc_errors", Meaning: "received FPDUs whose CRC did not match"},
	{Name: "payload_tx", Meaning: "application bytes sent over SDP"},
	{Name: "payload_rx", Meaning: "application bytes received over SDP"},
	{Name: "wire_tx", Meaning: "bytes handed to the kernel, all headers included"},
	{Name: "wire_rx", Meaning: "bytes read from the kernel, all headers included"},
	{Name: "credit_updates", Meaning: "messages sent only to return credits"},
	{Name: "credit_stalls", Meaning: "sends that found no credit (rdma/nic: no ring space)"},
	{Name: "user_copies_tx", Meaning: "payload bytes sent that were copied in user space"},
	{Name: "user_copies_rx", Meaning: "payload bytes received that were copied in user space"},
	{Name: "bcopy_sends", Meaning: "Data messages (credit, transport) or ring writes (rdma, nic) sent"},
	{Name: "coalesced_sends", Meaning: "sends merged into data already queued (held, appended, corked)"},
	{Name: "ring_acks", Meaning: "rdma/nic messages sent only to return ring space"},
	{Name: "direct_placed_rx", Meaning: "ring or ZCopy bytes read from the socket, and shared-memory bytes read from the ring, straight into place"},
	{Name: "zcopy_read_sends", Meaning: "SrcAvail offers made (Read ZCopy)"},
	{Name: "zcopy_cancels", Meaning: "SrcAvail offers withdrawn because the sink did not read"},
	{Name: "zcopy_tx", Meaning: "payload bytes sent by RDMA Read or Write instead of buffer copy"},
	{Name: "zcopy_rx", Meaning: "payload bytes received by RDMA Read or Write instead of buffer copy"},
	{Name: "zcopy_sink_avails", Meaning: "SinkAvail offers made (Write ZCopy)"},
	{Name: "zcopy_write_sends", Meaning: "RDMA Writes made into the peer's offered buffers"},
	{Name: "zcopy_write_rx", Meaning: "bytes the peer wrote into this end's offered buffers"},
	{Name: "tx_records", Meaning: "runs of FPDUs handed to the kernel as one record"},
	{Name: "shm_conns", Meaning: "of sdp_conns, those whose messages went through shared memory (SDP_SHM)"},
	{Name: "shm_bells_rung", Meaning: "doorbell octets written for a peer that slept or waited for room (shared memory)"},
	{Name: "shm_bells_heard", Meaning: "doorbell octets read (shared memory)"},
	{Name: "shm_polls", Meaning: "blocking calls that polled shared memory before sleeping (SDP_POLL_US)"},
	{Name: "shm_poll_hits", Meaning: "of shm_polls, those that found the peer's bytes without sleeping"},
	{Name: "shm_set_polls", Meaning: "epoll waits that polled shared memory before sleeping (SDP_POLL_US)"},
	{Name: "shm_set_poll_hits", Meaning: "of shm_set_polls, those that found a peer's bytes without sleeping"},
	{Name: "engine_polls", Meaning: "readiness questions the interposer asked the engine (poll, select, epoll)"},
	{Name: "flow_control", Meaning: "the configured flow control mode", Setting: true},
	{Name: "buffering", Meaning: "the configured buffering", Setting: true},
	{Name: "progress", Meaning: "the configured progress mode", Setting: true},
	{Name: "fallbacks", Meaning: "connections that fell back to TCP after the engine took them"},
	{Name: "panics", Meaning: "internal errors caught, each costing one connection"},
}
