package sdpcore

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The alternatives of the papers libsdp's design comes from stay selectable,
// so that their results can be reproduced (README.md, "Choosing the modes"):
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

var flowNames = [...]string{"credit", "rdma", "nic", "transport"}

func (f FlowControl) String() string {
	if int(f) < len(flowNames) {
		return flowNames[f]
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
		return "separate"
	}
	return "integrated"
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
		return "async"
	}
	return "inline"
}

// ParseFlowControl parses an SDP_FLOW_CONTROL value.
func ParseFlowControl(s string) (FlowControl, error) {
	for i, n := range flowNames {
		if strings.EqualFold(s, n) { // as the shim's strcasecmp
			return FlowControl(i), nil
		}
	}
	return 0, fmt.Errorf("SDP_FLOW_CONTROL=%q: want credit, rdma, nic or transport", s)
}

// ParseBuffering parses an SDP_BUFFERING value.
func ParseBuffering(s string) (Buffering, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "integrated":
		return BufIntegrated, nil
	case "separate":
		return BufSeparate, nil
	}
	return 0, fmt.Errorf("SDP_BUFFERING=%q: want separate or integrated", s)
}

// ParseProgress parses an SDP_PROGRESS value.
func ParseProgress(s string) (Progress, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "inline":
		return ProgressInline, nil
	case "async":
		return ProgressAsync, nil
	}
	return 0, fmt.Errorf("SDP_PROGRESS=%q: want inline or async", s)
}

// FromEnv sets the modes from the environment variables SDP_FLOW_CONTROL,
// SDP_BUFFERING, SDP_PROGRESS, SDP_ZCOPY_THRESHOLD and SDP_HANDSHAKE_TIMEOUT as getenv
// reports them. A bad value
// leaves the default and is reported through warn.
func (c *Config) FromEnv(getenv func(string) string, warn func(error)) {
	if v := getenv("SDP_FLOW_CONTROL"); v != "" {
		if f, err := ParseFlowControl(v); err != nil {
			warn(fmt.Errorf("%w; using %v", err, c.FlowControl))
		} else {
			c.FlowControl = f
		}
	}
	if v := getenv("SDP_BUFFERING"); v != "" {
		if b, err := ParseBuffering(v); err != nil {
			warn(fmt.Errorf("%w; using %v", err, c.Buffering))
		} else {
			c.Buffering = b
		}
	}
	if v := getenv("SDP_ZCOPY_THRESHOLD"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			warn(fmt.Errorf("SDP_ZCOPY_THRESHOLD=%q: want a byte count (0: no zero copy); using %d", v, c.ZCopyThreshold))
		} else {
			c.ZCopyThreshold = n
		}
	}
	if v := getenv("SDP_HANDSHAKE_TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || ms < 1 || ms > 3600000 {
			warn(fmt.Errorf("SDP_HANDSHAKE_TIMEOUT=%q: want milliseconds from 1 to 3600000; using %d", v, c.HandshakeTimeout.Milliseconds()))
		} else {
			c.HandshakeTimeout = time.Duration(ms) * time.Millisecond
		}
	}
	if v := getenv("SDP_PROGRESS"); v != "" {
		if p, err := ParseProgress(v); err != nil {
			warn(fmt.Errorf("%w; using %v", err, c.Progress))
		} else {
			c.Progress = p
		}
	}
}
