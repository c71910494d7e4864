package main

import "testing"

// TestFaultInjectKinds checks that SDP_TEST_PANIC counts only the calls of
// the kind it names, and that "any" counts them all.
func TestFaultInjectKinds(t *testing.T) {
	defer armFault(callOther, 0)
	panicked := func(kind callKind) (p bool) {
		defer func() { p = recover() != nil }()
		injectFault(7, kind)
		return false
	}
	for _, tc := range []struct {
		armed  callKind
		others []callKind
	}{
		{callSend, []callKind{callRecv, callPoll, callOther}},
		{callRecv, []callKind{callSend, callPoll, callOther}},
		{callPoll, []callKind{callSend, callRecv, callOther}},
	} {
		armFault(tc.armed, 2)
		for _, k := range tc.others {
			if panicked(k) {
				t.Fatalf("armed for kind %d, a call of kind %d panicked", tc.armed, k)
			}
		}
		if panicked(tc.armed) || !panicked(tc.armed) {
			t.Fatalf("armed for the 2nd call of kind %d: the 1st must pass and the 2nd panic", tc.armed)
		}
		if panicked(tc.armed) {
			t.Fatalf("kind %d: a second panic; the fault fires once", tc.armed)
		}
	}
	armFault(callAny, 3)
	if panicked(callOther) || panicked(callRecv) || !panicked(callSend) {
		t.Fatal(`"any" must count every kind of call`)
	}
}

// TestFaultInjectSendEntryPoints checks that SDP_TEST_PANIC=send fires on
// both send entry points: the shim sends through sdp_sendv_flags whenever
// the engine exports it, and through sdp_sendv only when it does not. The
// panic becomes the call's error (EIO), and is counted.
func TestFaultInjectSendEntryPoints(t *testing.T) {
	defer armFault(callOther, 0)
	ecfg.logLevel = -1 // the panic is logged; keep the test's output clean
	for name, send := range map[string]func() int64{
		"sdp_sendv":       func() int64 { return int64(sdp_sendv(1000, nil, 0)) },
		"sdp_sendv_flags": func() int64 { return int64(sdp_sendv_flags(1000, nil, 1, 0)) },
	} {
		before := panics.Load()
		armFault(callSend, 1)
		if rc := send(); rc != -int64(errnoEIOResult) {
			t.Errorf("%s with SDP_TEST_PANIC=send:1 returned %d, want %d (EIO)", name, rc, -errnoEIOResult)
		}
		if panics.Load() != before+1 {
			t.Errorf("%s: the panic was not counted", name)
		}
	}
	// A receive does not count toward send.
	armFault(callSend, 1)
	if rc := int64(sdp_recvv(1000, nil, 0, 0)); rc == -int64(errnoEIOResult) {
		t.Error("sdp_recvv met the fault armed for send")
	}
}
