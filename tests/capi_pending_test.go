//go:build capi_pending

package tests

import "testing"

// TestCAPIPending runs the C API families that wait for the interposer work (pendingFamilies).
func TestCAPIPending(t *testing.T) {
	runFamilies(t, pendingFamilies)
}
