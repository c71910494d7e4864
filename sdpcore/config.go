package sdpcore

import (
	"time"

	"libsdp/internal/settings"
)

// Limits on the receive buffers a peer may announce and we may configure.
const (
	maxRecvBufSz = 1 << 20
	maxRecvBufs  = 1024
)

// Config holds the per-process settings a connection starts from.
type Config struct {
	Markers        bool          // we require markers in FPDUs sent to us
	CRC            bool          // we ask for CRC32c in both directions
	MarkerSpacing  int           // 512 unless experimenting
	BufSize        int           // size of each receive buffer, BSDH included
	RecvBufs       int           // receive buffers posted: credits granted to the peer
	ConnectTimeout time.Duration // how long the connecting side waits for the MPA Request
	// HandshakeTimeout is how long the accepting side waits for the MPA
	// Reply and HelloAck: a peer that never answers costs a descriptor and
	// memory only that long.
	HandshakeTimeout time.Duration
	TxBacklog        int           // bytes framed but not yet taken by the kernel before senders wait
	Linger           time.Duration // how long a closed connection keeps flushing and draining
	Unaligned        bool          // FPDUs up to 64 KiB, cut into segments by the kernel (SDP_FPDU_ALIGN=off, the default)
	AlignLocal       bool          // align FPDUs on connections within the host too (SDP_FPDU_ALIGN=on)
	FlowControl      FlowControl   // asked for in Hello/HelloAck; both ends must agree
	Buffering        Buffering     // local: copies per byte of a buffer-copy transfer
	Progress         Progress      // local: who moves data between the application's calls
	ZCopyThreshold   int           // sends of at least this many bytes in one buffer go by Read ZCopy; 0: never
	ZCopyCancel      time.Duration // how long an offer waits for the sink's first read before buffer copy; 0: 20 ms
	SameHost         bool          // offer and take shared memory with a peer on this host (samehost.go)
	SameHostOff      string        // when set, this connection offers no shared memory, for this reason
	PollSpin         time.Duration // how long a blocking call polls shared memory before it sleeps (Conn.Spin)
	// SndBuf and RcvBuf are the application's SO_SNDBUF and SO_RCVBUF on
	// the socket when the connection starts (0: not set; bufsize.go).
	SndBuf, RcvBuf int
}

// Defaults of the modes, chosen from BenchmarkModes (docs/PERFORMANCE.md, "Choosing
// the modes"). The shim's Hello carries the same
// default flow control when SDP_FLOW_CONTROL is not set.
const (
	DefaultFlowControl = FlowCredit
	DefaultBuffering   = BufIntegrated
	DefaultProgress    = ProgressInline
)

// DefaultConfig returns the defaults the documentation lists.
func DefaultConfig() Config {
	return Config{
		Markers:          true,
		CRC:              true,
		MarkerSpacing:    512,
		BufSize:          64 << 10,
		RecvBufs:         16,
		ConnectTimeout:   2 * time.Second,
		HandshakeTimeout: 10 * time.Second,
		TxBacklog:        256 << 10,
		Linger:           60 * time.Second,
		FlowControl:      DefaultFlowControl,
		Buffering:        DefaultBuffering,
		Progress:         DefaultProgress,
		ZCopyThreshold:   DefaultZCopyThreshold,
		SameHost:         settings.SharedMemory.Def() != 0,
		Unaligned:        settings.FPDUAlign.Def() == 0, // off
		PollSpin:         time.Duration(settings.PollUS.Def()) * time.Microsecond,
	}
}

// Sanitize clamps values into ranges the protocol supports.
func (c *Config) Sanitize() {
	d := DefaultConfig()
	if c.MarkerSpacing <= 0 {
		c.MarkerSpacing = d.MarkerSpacing
	}
	if c.BufSize < minRecvBufSz || c.BufSize > maxRecvBufSz {
		c.BufSize = d.BufSize
	}
	if c.RecvBufs < minRecvBufs || c.RecvBufs > maxRecvBufs {
		c.RecvBufs = d.RecvBufs
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = d.ConnectTimeout
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.TxBacklog <= 0 {
		c.TxBacklog = d.TxBacklog
	}
	if c.Linger <= 0 {
		c.Linger = d.Linger
	}
	if c.FlowControl >= numFlowControls {
		c.FlowControl = d.FlowControl
	}
	if c.Buffering > BufSeparate {
		c.Buffering = d.Buffering
	}
	if c.ZCopyThreshold < 0 {
		c.ZCopyThreshold = d.ZCopyThreshold
	}
	if c.Progress > ProgressAsync {
		c.Progress = d.Progress
	}
}
