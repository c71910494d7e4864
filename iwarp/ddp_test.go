package iwarp

import (
	"bytes"
	"reflect"
	"testing"
)

// validSegment builds a valid ULPDU for op with the given payload.
func validSegment(op Opcode, last bool, payload []byte) (DDPSegment, []byte) {
	info, _ := op.Info()
	s := DDPSegment{Tagged: info.Tagged, Last: last, RDMAPCtrl: RDMAPCtrl(op), Payload: payload}
	if info.Tagged {
		s.STag, s.TO = 0xDEADBEEF, 0x0123456789ABCDEF
	} else {
		s.QN, s.MSN, s.MO = info.QN, 7, 0
		if info.Invalidate {
			s.InvalidateSTag = 0xCAFE0001
		}
		if info.Payload >= 0 || info.MinPayload > 0 {
			s.Last = true
		} else {
			s.MO = 4096
		}
	}
	b := s.AppendHeader(nil)
	return s, append(b, payload...)
}

func payloadFor(op Opcode) []byte {
	info, _ := op.Info()
	switch {
	case info.Payload >= 0:
		return bytes.Repeat([]byte{0x5A}, info.Payload)
	case info.MinPayload > 0:
		return bytes.Repeat([]byte{0}, info.MinPayload)
	}
	return []byte("payload bytes")
}

func TestDDPRoundTripEachOpcode(t *testing.T) {
	for op := Opcode(0); op <= OpImmediateSE; op++ {
		for _, last := range []bool{true, false} {
			want, b := validSegment(op, last, payloadFor(op))
			got, err := ParseDDPSegment(b)
			if err != nil {
				t.Fatalf("%v: %v", op, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%v:\n got %+v\nwant %+v", op, got, want)
			}
			if got.Opcode() != op || got.HeaderLen() != DDPHeader(b).Len() {
				t.Fatalf("%v: opcode %v", op, got.Opcode())
			}
			h := DDPHeader(b)
			if h.Tagged() != want.Tagged || h.Last() != want.Last || h.DV() != 1 || h.Opcode() != op || h.RDMAPControl() != RDMAPCtrl(op) {
				t.Fatalf("%v: header view", op)
			}
			if want.Tagged && (h.STag() != want.STag || h.TO() != want.TO) {
				t.Fatalf("%v: tagged view", op)
			}
			if !want.Tagged && (h.QN() != want.QN || h.MSN() != want.MSN || h.MO() != want.MO || h.RsvdULP32() != want.InvalidateSTag) {
				t.Fatalf("%v: untagged view", op)
			}
		}
	}
}

func TestDDPHeaderEncoding(t *testing.T) {
	var b [DDPUntaggedHeaderLen]byte
	EncodeUntaggedHeader(b[:], true, RDMAPCtrl(OpSend), 0, 0, 1, 0)
	if want := rfcULPDU(1)[:18]; !bytes.Equal(b[:], want) {
		t.Fatalf("untagged % x, want % x", b, want)
	}
	var tb [DDPTaggedHeaderLen]byte
	EncodeTaggedHeader(tb[:], false, RDMAPCtrl(OpRDMAWrite), 0x01020304, 0x05060708090A0B0C)
	if want := []byte{0x81, 0x40, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; !bytes.Equal(tb[:], want) {
		t.Fatalf("tagged % x", tb)
	}
}

func TestDDPRejects(t *testing.T) {
	_, send := validSegment(OpSend, true, []byte("x"))
	_, write := validSegment(OpRDMAWrite, true, []byte("x"))
	_, rreq := validSegment(OpReadRequest, true, payloadFor(OpReadRequest))
	_, imm := validSegment(OpImmediate, true, payloadFor(OpImmediate))
	mod := func(b []byte, i int, v byte) []byte {
		c := append([]byte(nil), b...)
		c[i] = v
		return c
	}
	type want struct {
		layer Layer
		typ   uint8
		code  uint8
	}
	for _, tt := range []struct {
		name string
		in   []byte
		want want
	}{
		{"empty", nil, want{LayerDDP, DDPErrTypeCatastrophic, 0}},
		{"short untagged", send[:17], want{LayerDDP, DDPErrTypeCatastrophic, 0}},
		{"short tagged", write[:13], want{LayerDDP, DDPErrTypeCatastrophic, 0}},
		{"DV 0 untagged", mod(send, 0, 0x40), want{LayerDDP, DDPErrTypeUntagged, DDPErrUntaggedVersion}},
		{"DV 2 tagged", mod(write, 0, 0xC2), want{LayerDDP, DDPErrTypeTagged, DDPErrTaggedVersion}},
		{"reserved 0x04", mod(send, 0, 0x45), want{LayerDDP, DDPErrTypeUntagged, DDPErrUntaggedVersion}},
		{"reserved 0x20 tagged", mod(write, 0, 0xE1), want{LayerDDP, DDPErrTypeTagged, DDPErrTaggedVersion}},
		{"RV 0", mod(send, 1, 0x03), want{LayerRDMAP, RDMAPErrTypeOperation, RDMAPErrVersion}},
		{"RV 2", mod(send, 1, 0x83), want{LayerRDMAP, RDMAPErrTypeOperation, RDMAPErrVersion}},
		{"RDMAP reserved", mod(send, 1, 0x53), want{LayerRDMAP, RDMAPErrTypeOperation, RDMAPErrVersion}},
		{"unknown opcode", mod(send, 1, 0x4A), want{LayerRDMAP, RDMAPErrTypeOperation, RDMAPErrOpcode}},
		{"tagged Send", mod(mod(send, 0, 0xC1), 1, 0x43)[:14], want{LayerRDMAP, RDMAPErrTypeOperation, RDMAPErrOpcode}},
		{"untagged Write", mod(send, 1, 0x40), want{LayerRDMAP, RDMAPErrTypeOperation, RDMAPErrOpcode}},
		{"Send on QN 1", mod(send, 9, 1), want{LayerDDP, DDPErrTypeUntagged, DDPErrInvalidQN}},
		{"ReadRequest on QN 0", mod(rreq, 9, 0), want{LayerDDP, DDPErrTypeUntagged, DDPErrInvalidQN}},
		{"ReadRequest short", rreq[:len(rreq)-1], want{LayerRDMAP, RDMAPErrTypeOperation, RDMAPErrUnspecified}},
		{"ReadRequest L=0", mod(rreq, 0, 0x01), want{LayerDDP, DDPErrTypeUntagged, DDPErrTooLong}},
		{"ReadRequest MO 4", mod(rreq, 17, 4), want{LayerDDP, DDPErrTypeUntagged, DDPErrInvalidMO}},
		{"Immediate of 9", append(append([]byte(nil), imm...), 0), want{LayerRDMAP, RDMAPErrTypeOperation, RDMAPErrUnspecified}},
		{"Terminate too short", func() []byte { _, b := validSegment(OpTerminate, true, []byte{1, 2, 3}); return b }(), want{LayerRDMAP, RDMAPErrTypeOperation, RDMAPErrUnspecified}},
	} {
		_, err := ParseDDPSegment(tt.in)
		e := asError(t, err)
		if e.Layer != tt.want.layer || e.Type != tt.want.typ || e.Code != tt.want.code {
			t.Errorf("%s: got %v/%d/%#x (%v), want %v/%d/%#x", tt.name, e.Layer, e.Type, e.Code, e, tt.want.layer, tt.want.typ, tt.want.code)
		}
	}
}
