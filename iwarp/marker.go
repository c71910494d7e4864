package iwarp

import (
	"encoding/binary"
	"fmt"
)

// MPA markers (RFC 5044 §4.3).
//
// A marker is 4 octets, RESERVED(16)=0 | FPDUPTR(16), big-endian. Markers sit
// at every Spacing-th octet of one direction's stream, counted from the start
// of Full Operation: stream offset 0 holds the first marker, so a direction
// with markers begins with one. The origin is per direction (the octet after
// that side's own Request/Reply), never the TCP ISN.
//
// FPDUPTR is the distance from the marker back to the ULPDU_Length field of
// the FPDU the marker lies in. A marker that falls exactly between two FPDUs
// belongs to the following one and carries FPDUPTR 0; every later marker of
// that FPDU points at its ULPDU_Length, 4 octets after the leading marker.
// A marker that falls right after the PAD goes before the CRC and belongs to
// the FPDU it ends. All markers of an FPDU, the leading one included, are
// covered by its CRC (RFC 5044 §4.3; §4.4, Fig.5: the CRC 0x83992352 holds
// only over the leading marker and the FPDU together).
//
// Every FPDU is a multiple of 4 octets long, markers included, so as long as
// the spacing is a multiple of 4 a marker never splits ULPDU_Length or the
// CRC: it lands between 4-octet words of ULPDU_Length|ULPDU|PAD, or just
// before the CRC.
const (
	MarkerLen = 4

	// DefaultMarkerSpacing is RFC 5044's marker interval.
	DefaultMarkerSpacing = 512
	// MinMarkerSpacing and MaxMarkerSpacing bound the configurable spacing,
	// which exists for experiments with other intervals; RFC 5044 peers
	// expect 512. The spacing must also be a multiple of 4.
	MinMarkerSpacing = 16
	MaxMarkerSpacing = 65536
)

// Marker is a view of a 4-octet marker.
type Marker []byte

func (m Marker) Reserved() uint16 { return binary.BigEndian.Uint16(m[0:2]) }
func (m Marker) FPDUPTR() uint16  { return binary.BigEndian.Uint16(m[2:4]) }

// EncodeMarker writes a marker with the given FPDUPTR into b[0:4].
func EncodeMarker(b []byte, fpduptr uint16) {
	_ = b[3]
	b[0], b[1] = 0, 0
	binary.BigEndian.PutUint16(b[2:4], fpduptr)
}

// ValidMarkerSpacing reports whether s can be used as a marker spacing
// (0 stands for DefaultMarkerSpacing).
func ValidMarkerSpacing(s int) error {
	if s == 0 {
		return nil
	}
	if s < MinMarkerSpacing || s > MaxMarkerSpacing || s%4 != 0 {
		return fmt.Errorf("iwarp: marker spacing %d: want a multiple of 4 in [%d, %d] (RFC 5044: %d)",
			s, MinMarkerSpacing, MaxMarkerSpacing, DefaultMarkerSpacing)
	}
	return nil
}

// normSpacing maps any int onto a usable spacing: 0 becomes the default,
// others are rounded down to a multiple of 4 and clamped to the bounds.
func normSpacing(s int) int {
	if s == 0 {
		return DefaultMarkerSpacing
	}
	s &^= 3
	return min(max(s, MinMarkerSpacing), MaxMarkerSpacing)
}

// markerLayout is where the markers of one FPDU go. content is the length of
// ULPDU_Length|ULPDU|PAD (a multiple of 4) and phase the FPDU's stream
// position modulo spacing.
//
// The first marker is at wire offset first = (spacing-phase) mod spacing,
// after first content octets, and later ones follow every spacing octets,
// each after another spacing-4 content octets. Marker k exists while the
// content before it, first + k*(spacing-4), is at most content: equality is
// the marker just before the CRC.
func markerLayout(phase, content, spacing int) (first, count int) {
	first = spacing - phase
	if phase == 0 {
		first = 0
	}
	if first > content {
		return first, 0
	}
	return first, (content-first)/(spacing-4) + 1
}

// maxFPDUPTR is the largest FPDUPTR any FPDU with content octets of
// ULPDU_Length|ULPDU|PAD needs at any phase. With q, r = content divided by
// spacing-4: a phase whose first marker comes after r content octets puts
// the last marker at r + q*spacing; if r is 0 the worst is a leading marker
// at phase 0, whose last marker is q*spacing-4 past ULPDU_Length.
func maxFPDUPTR(content, spacing int) int {
	q, r := content/(spacing-4), content%(spacing-4)
	if r == 0 {
		return q*spacing - 4
	}
	return q*spacing + r
}

// maxULPDUMarkers is the longest ULPDU whose FPDU, at any stream position,
// has every FPDUPTR fit in 16 bits (they are multiples of 4, so ≤ 0xFFFC).
// maxFPDUPTR grows with content, so a binary search over content finds it.
func maxULPDUMarkers(spacing int) int {
	lo, hi := 4, (2+maxULPDULen+3)&^3 // content values, multiples of 4
	if maxFPDUPTR(hi, spacing) <= 0xFFFC {
		return maxULPDULen
	}
	for hi-lo > 4 {
		mid := (lo + (hi-lo)/2) &^ 3
		if maxFPDUPTR(mid, spacing) <= 0xFFFC {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo - 2
}
