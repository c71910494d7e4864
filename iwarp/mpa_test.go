package iwarp

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestMPAFrameRoundTrip(t *testing.T) {
	pd256 := bytes.Repeat([]byte{0xA5}, MPAMaxPrivateData)
	for _, f := range []MPAFrame{
		{Rev: 1},
		{Reply: true, Rev: 1},
		{Markers: true, CRC: true, Rev: 1, PrivateData: []byte("hello")},
		{Reply: true, Markers: true, Rev: 1, PrivateData: pd256},
		{Reply: true, Reject: true, Rev: 1, PrivateData: []byte("no")},
		{Reply: true, CRC: true, Enhanced: true, Rev: 2, PrivateData: AppendMPAv2Params(nil, MPAv2Params{IRD: 16, ORD: 16})},
	} {
		if err := f.Validate(); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		b := AppendMPAFrame([]byte("xx"), &f)[2:]
		if len(b) != MPAHeaderLen+len(f.PrivateData) {
			t.Fatalf("%v: %d octets", f, len(b))
		}
		g, n, err := ParseMPAFrame(append(b, "trailing FPDU"...), f.Reply)
		if err != nil || n != len(b) {
			t.Fatalf("%v: n=%d err=%v", f, n, err)
		}
		if len(f.PrivateData) == 0 {
			f.PrivateData = g.PrivateData[:0]
		}
		if !reflect.DeepEqual(f, g) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", g, f)
		}
	}
}

func TestMPAFrameWireBytes(t *testing.T) {
	b := AppendMPAFrame(nil, &MPAFrame{Markers: true, CRC: true, PrivateData: []byte{1, 2}})
	want := append([]byte("MPA ID Req Frame"), 0xC0, 0x01, 0x00, 0x02, 1, 2)
	if !bytes.Equal(b, want) {
		t.Fatalf("% x", b)
	}
	h := MPAHeader(b)
	if !h.IsRequest() || h.IsReply() || h.Flags() != 0xC0 || h.Rev() != 1 || h.PDLength() != 2 || string(h.Key()) != "MPA ID Req Frame" {
		t.Fatal("header view")
	}
}

func mpaCode(t *testing.T, err error) uint8 {
	t.Helper()
	e := asError(t, err)
	if e.Layer != LayerMPA || e.Type != 0 {
		t.Fatalf("%v: layer %v type %d", e, e.Layer, e.Type)
	}
	return e.Code
}

func TestMPAFrameRejects(t *testing.T) {
	valid := AppendMPAFrame(nil, &MPAFrame{Reply: true, Rev: 1, PrivateData: []byte("pd")})
	mod := func(i int, v byte) []byte {
		b := append([]byte(nil), valid...)
		b[i] = v
		return b
	}
	for _, tt := range []struct {
		name      string
		in        []byte
		wantReply bool
		msg       string
	}{
		{"bad key", mod(3, '_'), true, "octet 3"},
		{"request where reply expected", AppendMPAFrame(nil, &MPAFrame{Rev: 1}), true, "Request frame where a Reply"},
		{"reply where request expected", valid, false, "Reply frame where a Request"},
		{"rev 0", mod(17, 0), true, "revision 0"},
		{"rev 3", mod(17, 3), true, "revision 3"},
		{"PD_Length 513", append(mod(18, 0x02)[:19], 0x01), true, "limit of 512"},
		{"PD_Length 300", append(mod(18, 0x01)[:19], 0x2C), true, "limit of 256"},
		{"R in request", mod(16, MPAFlagReject), false, "R (reject)"},
		{"SSH banner", []byte("SSH-2.0-OpenSSH\r\n"), true, "not an MPA Reply"},
		{"HTTP", []byte("HTTP/1.1 200 OK"), true, "not an MPA Reply"},
		{"SMTP", []byte("220 smtp.example.org ESMTP"), false, "not an MPA Request"},
		{"one foreign octet", []byte("S"), true, "octet 0"},
	} {
		in := tt.in
		if tt.name == "R in request" {
			in = AppendMPAFrame(nil, &MPAFrame{Rev: 1})
			in[16] = MPAFlagReject
		}
		_, n, err := ParseMPAFrame(in, tt.wantReply)
		if errors.Is(err, ErrNeedMore) || n != 0 {
			t.Fatalf("%s: n=%d err=%v", tt.name, n, err)
		}
		if code := mpaCode(t, err); code != MPAErrReqRep {
			t.Fatalf("%s: code %d", tt.name, code)
		}
		if !strings.Contains(err.Error(), tt.msg) || !strings.HasPrefix(err.Error(), "iwarp: MPA: ") {
			t.Fatalf("%s: message %q lacks %q", tt.name, err, tt.msg)
		}
	}
}

func TestMPAFramePrefixNeedsMore(t *testing.T) {
	b := AppendMPAFrame(nil, &MPAFrame{Reply: true, CRC: true, Rev: 2, PrivateData: []byte("0123456789")})
	for k := 0; k < len(b); k++ {
		if _, n, err := ParseMPAFrame(b[:k], true); !errors.Is(err, ErrNeedMore) || n != 0 {
			t.Fatalf("prefix %d: n=%d err=%v", k, n, err)
		}
	}
	if _, n, err := ParseMPAFrame(b, true); err != nil || n != len(b) {
		t.Fatalf("whole: n=%d err=%v", n, err)
	}
}

func TestMPAFrameValidate(t *testing.T) {
	for _, f := range []MPAFrame{
		{Reject: true},
		{Rev: 3},
		{PrivateData: make([]byte, MPAMaxPrivateData+1)},
	} {
		if f.Validate() == nil {
			t.Errorf("%v accepted", f)
		}
	}
	// Rev 0 is sent as 1.
	b := AppendMPAFrame(nil, &MPAFrame{})
	if b[17] != 1 {
		t.Fatalf("default rev %d", b[17])
	}
}

func TestMPAv2Params(t *testing.T) {
	p := MPAv2Params{PeerToPeer: true, WriteRTR: true, IRD: 0x3FFF, ORD: 7}
	b := AppendMPAv2Params(nil, p)
	if !bytes.Equal(b, []byte{0xBF, 0xFF, 0x80, 0x07}) {
		t.Fatalf("% x", b)
	}
	pd := append(b, "ulp"...)
	q, rest, err := ParseMPAv2Params(pd)
	if err != nil || q != p || string(rest) != "ulp" {
		t.Fatalf("%+v %q %v", q, rest, err)
	}
	p = MPAv2Params{SendRTR: true, ReadRTR: true, IRD: 1, ORD: 2}
	if q, _, _ := ParseMPAv2Params(AppendMPAv2Params(nil, p)); q != p {
		t.Fatalf("%+v", q)
	}
	if _, _, err := ParseMPAv2Params([]byte{1, 2, 3}); mpaCode(t, err) != MPAErrReqRep {
		t.Fatal("short block accepted")
	}
}
