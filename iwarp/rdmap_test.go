package iwarp

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestOpcodeTable(t *testing.T) {
	for _, tt := range []struct {
		op     Opcode
		name   string
		tagged bool
		qn     uint32
	}{
		{OpRDMAWrite, "RDMAWrite", true, 0},
		{OpReadRequest, "ReadRequest", false, 1},
		{OpReadResponse, "ReadResponse", true, 0},
		{OpSend, "Send", false, 0},
		{OpSendInvalidate, "SendInvalidate", false, 0},
		{OpSendSE, "SendSE", false, 0},
		{OpSendSEInvalidate, "SendSEInvalidate", false, 0},
		{OpTerminate, "Terminate", false, 2},
		{OpImmediate, "Immediate", false, 0},
		{OpImmediateSE, "ImmediateSE", false, 0},
	} {
		info, ok := tt.op.Info()
		if !ok || info.Name != tt.name || tt.op.String() != tt.name || info.Tagged != tt.tagged || tt.op.Tagged() != tt.tagged || (!tt.tagged && info.QN != tt.qn) {
			t.Errorf("%v: %+v", tt.op, info)
		}
		if RDMAPCtrl(tt.op) != 0x40|uint8(tt.op) {
			t.Errorf("%v: control %#x", tt.op, RDMAPCtrl(tt.op))
		}
	}
	if _, ok := Opcode(0xA).Info(); ok || Opcode(0xA).String() != "AtomicRequest" || Opcode(0xC).String() != "Opcode(0xc)" {
		t.Error("atomics and unknown opcodes")
	}
}

func TestReadRequestRoundTrip(t *testing.T) {
	r := ReadRequest{SinkSTag: 0x11223344, SinkTO: 0x5566778899AABBCC, Size: 65536, SrcSTag: 0xA0B0C0D0, SrcTO: 0x0102030405060708}
	var b [ReadRequestHeaderLen]byte
	EncodeReadRequest(b[:], &r)
	want := []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0, 1, 0, 0,
		0xA0, 0xB0, 0xC0, 0xD0, 1, 2, 3, 4, 5, 6, 7, 8}
	if !bytes.Equal(b[:], want) {
		t.Fatalf("% x", b)
	}
	h := ReadRequestHeader(b[:])
	if h.SinkSTag() != r.SinkSTag || h.SinkTO() != r.SinkTO || h.RDMARDSZ() != r.Size || h.SrcSTag() != r.SrcSTag || h.SrcTO() != r.SrcTO {
		t.Fatal("view")
	}
	got, err := ParseReadRequest(b[:])
	if err != nil || got != r {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := ParseReadRequest(b[:27]); err == nil {
		t.Fatal("short header accepted")
	}
	// Carried in a segment.
	seg, err := ParseDDPSegment(append(func() []byte {
		var h [DDPUntaggedHeaderLen]byte
		EncodeUntaggedHeader(h[:], true, RDMAPCtrl(OpReadRequest), 0, QNReadRequest, 1, 0)
		return h[:]
	}(), b[:]...))
	if err != nil || seg.Opcode() != OpReadRequest {
		t.Fatal(err)
	}
}

func TestTerminateEncoding(t *testing.T) {
	var b [TerminateHeaderLen]byte
	EncodeTerminate(b[:], TerminateFor(mpaErr(MPAErrCRC, "x")))
	if !bytes.Equal(b[:], []byte{0x20, 0x02, 0, 0}) {
		t.Fatalf("% x", b)
	}
	EncodeTerminate(b[:], TerminateCtrl{Layer: LayerDDP, EType: DDPErrTypeUntagged, Code: DDPErrMSNRange, M: true, D: true, R: true})
	if !bytes.Equal(b[:], []byte{0x12, 0x03, 0xE0, 0}) {
		t.Fatalf("% x", b)
	}
	h := TerminateHeader(b[:])
	if h.Layer() != LayerDDP || h.EType() != 2 || h.Code() != 3 || !h.M() || !h.D() || !h.R() || h.Reserved() != 0 {
		t.Fatal("view")
	}
	if c := TerminateFor(nil); c.Layer != LayerRDMAP || c.EType != RDMAPErrTypeCatastrophic {
		t.Fatalf("%v", c)
	}
}

func TestTerminateRoundTrip(t *testing.T) {
	var ddp [DDPUntaggedHeaderLen]byte
	EncodeUntaggedHeader(ddp[:], true, RDMAPCtrl(OpReadRequest), 0, 1, 9, 0)
	var rdma [ReadRequestHeaderLen]byte
	EncodeReadRequest(rdma[:], &ReadRequest{Size: 4096})
	in := Terminate{
		TerminateCtrl: TerminateCtrl{Layer: LayerRDMAP, EType: RDMAPErrTypeProtection, Code: RDMAPErrBaseBounds, M: true},
		SegLen:        46, DDPHeader: ddp[:], RDMAHeader: rdma[:],
	}
	b := AppendTerminate(nil, &in)
	if len(b) != 4+2+18+28 {
		t.Fatalf("%d octets", len(b))
	}
	out, err := ParseTerminate(b)
	if err != nil {
		t.Fatal(err)
	}
	in.D, in.R = true, true
	if out.TerminateCtrl != in.TerminateCtrl || out.SegLen != 46 || !bytes.Equal(out.DDPHeader, ddp[:]) || !bytes.Equal(out.RDMAHeader, rdma[:]) {
		t.Fatalf("%+v", out)
	}
	for k := 0; k < len(b); k++ {
		if _, err := ParseTerminate(b[:k]); err == nil {
			t.Fatalf("truncated to %d accepted", k)
		}
	}
	// The peer's complaint as an error.
	e := out.Err()
	if !strings.Contains(e.Error(), "base or bounds") || !errors.Is(e, &Error{Layer: LayerRDMAP, Type: 1, Code: 1}) {
		t.Fatalf("%v", e)
	}
	// A whole Terminate message frames and parses as a DDP segment.
	var hdr [DDPUntaggedHeaderLen]byte
	EncodeUntaggedHeader(hdr[:], true, RDMAPCtrl(OpTerminate), 0, QNTerminate, 1, 0)
	seg, err := ParseDDPSegment(append(hdr[:], b...))
	if err != nil || seg.Opcode() != OpTerminate {
		t.Fatal(err)
	}
}

func TestErrorMessages(t *testing.T) {
	for _, tt := range []struct {
		err  *Error
		want string
	}{
		{&Error{Layer: LayerMPA, Code: MPAErrCRC}, "iwarp: MPA: received MPA CRC does not match the calculated value"},
		{&Error{Layer: LayerDDP, Type: DDPErrTypeUntagged, Code: DDPErrInvalidQN, Msg: "Send on QN 5"}, "iwarp: DDP: Send on QN 5"},
		{&Error{Layer: LayerRDMAP, Type: RDMAPErrTypeOperation, Code: RDMAPErrOpcode}, "iwarp: RDMAP: remote operation error: unexpected opcode"},
		{&Error{Layer: 9, Type: 3, Code: 4}, "iwarp: Layer(9): error type 3 code 0x4"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}
