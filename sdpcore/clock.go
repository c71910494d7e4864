package sdpcore

import "time"

// The entry points take the caller's time, which tests choose. The zero
// Time means "now, if needed": the preload passes it on its hot paths
// (send, receive, poll), because reading the system clock there was 13% of
// a 64-byte send's CPU, and most calls set or check no timer. Every place
// that sets or checks a timer reads the time through orNow.
func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}
