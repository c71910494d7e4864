package sdpcore

import (
	"strconv"
	"time"

	"libsdp/internal/settings"
)

// The alternatives of the papers libsdp's design comes from stay selectable,
// so that their results can be reproduced (docs/PERFORMANCE.md, "Choosing the modes"):
//
//   - Balaji, Bhagvat, Thakur and Panda, "Sockets Direct Protocol for Hybrid
//     Network Stacks: A Case Study with iWARP over 10G Ethernet": integrated
//     buffering (§4.1), coalescing by appending to a queued message (§4.2),
//     no SDP-level flow control (§4.3);
//   - Balaji, Bhagvat, Panda, Thakur and Gropp, "Advanced Flow-control
//     Mechanisms for the Sockets Direct Protocol over InfiniBand" (ICPP
//     2007): RDMA-based (§3) and NIC-assisted (§4) flow control;
//   - Majumder, Rixner and Pai, "An Event-driven Architecture for MPI
//     Libraries": an event-driven progress engine (§3).

// FlowControl says how a sender knows the receiver has room.
type FlowControl uint8

// Flow-control modes. Their codes are carried in Hello and HelloAck.
const (
	// FlowCredit: N receive buffers of S bytes; one message uses one
	// buffer; credits come back in Bufs once half are emptied.
	FlowCredit FlowControl = iota
	// FlowRDMA ("Advanced Flow-control Mechanisms", §3): the sender manages
	// one receive ring of N·S bytes, packs data into it by RDMA Write
	// followed by Immediate Data, and coalesces into its own send buffer when
	// the ring is full. Held data goes out only when a later call of the
	// application runs.
	FlowRDMA
	// FlowNIC ("Advanced Flow-control Mechanisms", §4): FlowRDMA with
	// messages no larger than the virtual window S, and held data flushed
	// asynchronously by a goroutine as soon as ring space comes back.
	FlowNIC
	// FlowTransport ("Sockets Direct Protocol for Hybrid Network Stacks",
	// §4.3): no SDP-level flow control; TCP's window stops a sender that
	// outruns its receiver, and a send that finds the previous message still
	// queued appends to it.
	FlowTransport
	numFlowControls
)

// The modes' codes are their words' indices in the settings table.
func (f FlowControl) String() string {
	if f < numFlowControls {
		return settings.FlowControl.Values[f]
	}
	return "FlowControl(" + strconv.Itoa(int(f)) + ")"
}

// ring reports whether the mode uses the sender-managed receive ring.
func (f FlowControl) ring() bool { return f == FlowRDMA || f == FlowNIC }

// Buffering says how many user-space copies a buffer-copy send and receive
// make ("Sockets Direct Protocol for Hybrid Network Stacks", §4.1).
type Buffering uint8

// Buffering modes.
const (
	// BufIntegrated: one copy each way. The sender copies into the
	// transmit buffer, leaving the marker gaps of the MPA stream position,
	// and iWARP writes markers and CRC in place; the receiver copies from
	// the receive chunk straight into the application's buffer.
	BufIntegrated Buffering = iota
	// BufSeparate: SDP copies into its own private buffer first and iWARP
	// copies that into its marker buffer (and the reverse on receive): two
	// copies each way, as an SDP written for a full-offload RNIC does.
	BufSeparate
)

func (b Buffering) String() string {
	if b == BufSeparate {
		return settings.Buffering.Values[BufSeparate]
	}
	return settings.Buffering.Values[BufIntegrated]
}

// Progress says who moves data when the application is not in a call.
type Progress uint8

// Progress modes.
const (
	// ProgressInline: only the application's calls (and a short-lived
	// flush of bytes the kernel could not take) move data.
	ProgressInline Progress = iota
	// ProgressAsync ("An Event-driven Architecture for MPI Libraries"): an
	// event-driven goroutine per connection drains the socket, returns
	// credits, flushes held data and answers RDMA Reads while the application
	// computes. Sends with room still go out from the caller's thread.
	ProgressAsync
)

func (p Progress) String() string {
	if p == ProgressAsync {
		return settings.Progress.Values[ProgressAsync]
	}
	return settings.Progress.Values[ProgressInline]
}

// FromEnv sets the settings the engine reads itself
// (settings.ReadBy(settings.Engine)) as getenv reports them, and returns
// them as read, for the engine's settings line. A bad value is the table's
// default, reported through warn.
func (c *Config) FromEnv(getenv func(string) string, warn func(error)) []settings.Value {
	var vs []settings.Value
	read := func(s *settings.Setting) int64 {
		n, err := s.Get(getenv)
		if err != nil {
			warn(err)
		}
		vs = append(vs, settings.Value{Setting: s, Code: n})
		return n
	}
	c.HandshakeTimeout = time.Duration(read(settings.HandshakeTimeout)) * time.Millisecond
	c.FlowControl = FlowControl(read(settings.FlowControl))
	c.Buffering = Buffering(read(settings.Buffering))
	c.Progress = Progress(read(settings.Progress))
	c.ZCopyThreshold = int(read(settings.ZCopyThreshold))
	c.SameHost = read(settings.SharedMemory) != 0
	c.PollSpin = time.Duration(read(settings.PollUS)) * time.Microsecond
	return vs
}
