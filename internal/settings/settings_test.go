package settings

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "write "+HeaderPath+" from the table")

// TestCHeader fails when shim/settings.h is not what the table generates:
// a setting changed here and not regenerated for the shim.
func TestCHeader(t *testing.T) {
	path := filepath.Join("..", "..", HeaderPath)
	want := CHeader()
	if *update {
		require.NoError(t, os.WriteFile(path, want, 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got),
		"%s is stale: go test ./internal/settings -run TestCHeader -update", HeaderPath)
}

// TestTable checks the table itself: unique names, valid defaults, sane ranges.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All {
		assert.False(t, seen[s.Name], "%s twice", s.Name)
		seen[s.Name] = true
		assert.NotZero(t, s.Readers, "%s: read by nobody", s.Name)
		assert.NotEmpty(t, s.Meaning, s.Name)
		assert.NotEmpty(t, s.Default, s.Name)
		if s.Parsed() {
			_, err := s.parse(s.Default)
			assert.NoError(t, err, "%s: default", s.Name)
		}
		if s.Kind == Int {
			assert.LessOrEqual(t, s.Min, s.Max, s.Name)
		}
		if s.Kind == Enum && s.Numeric {
			assert.LessOrEqual(t, len(s.Values), 10, "%s: codes are one digit", s.Name)
		}
		assert.Same(t, s, Lookup(s.Name))
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		s    *Setting
		in   string
		want int64
		ok   bool
	}{
		{ZCopyThreshold, "", 0, true},
		{ZCopyThreshold, " 10 ", 10, true},
		{ZCopyThreshold, "\t+7\n", 7, true},
		{ZCopyThreshold, "-0", 0, true},
		{ZCopyThreshold, "64k", 0, false},
		{ZCopyThreshold, "-1", 0, false},
		{ZCopyThreshold, "0x10", 0, false},
		{ZCopyThreshold, "1_000", 0, false},
		{ZCopyThreshold, " ", 0, false},
		{ZCopyThreshold, "99999999999999999999", 0, false},
		{ZCopyThreshold, "9223372036854775807", 9223372036854775807, true},
		{MarkerSpacing, "516", 516, true},
		{MarkerSpacing, "514", 512, false},
		{MarkerSpacing, "60", 512, false},
		{PortOffset, "64512", 20000, false},
		{FlowControl, " RDMA ", 1, true},
		{FlowControl, "tranſport", 0, false}, // strcasecmp knows no Unicode folds
		{LogLevel, "DEBUG", 3, true},
		{LogLevel, "2", 2, true},
		{LogLevel, "4", 1, false},
		{Mode, "Tcp", 2, true},
		{Markers, "Off", 0, true},
		{Markers, " TRUE", 1, true},
		{Markers, "2", 1, false},
		{Stats, "yes", 1, true},
	}
	for _, c := range cases {
		got, err := c.s.Parse(c.in)
		assert.Equal(t, c.want, got, "%s=%q", c.s.Name, c.in)
		assert.Equal(t, c.ok, err == nil, "%s=%q: %v", c.s.Name, c.in, err)
	}
	_, err := ZCopyThreshold.Parse("64k")
	assert.EqualError(t, err, `SDP_ZCOPY_THRESHOLD="64k" is not a decimal integer >= 0; using 0`)
	_, err = MarkerSpacing.Parse("514")
	assert.EqualError(t, err, `SDP_MARKER_SPACING="514" is not a multiple of 4 from 64 to 65532; using 512`)
}

// FuzzParse: a value is either accepted within the grammar or reported
// with the default, never both, and never out of range.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "0", "64k", " 10 ", "-1", "rdma", "on"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, s := range All {
			if !s.Parsed() {
				continue
			}
			n, err := s.Parse(v)
			if err != nil {
				require.Equal(t, s.Def(), n)
				continue
			}
			switch s.Kind {
			case Int:
				require.True(t, n >= s.Min && n <= s.Max, "%s=%q: %d", s.Name, v, n)
			case Bool:
				require.True(t, n == 0 || n == 1)
			case Enum:
				require.True(t, n >= 0 && n < int64(len(s.Values)))
			}
		}
	})
}
