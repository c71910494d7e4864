// Package settings is the one table of the environment variables libsdp
// reads: name, default, grammar, range, meaning and which side reads it.
//
// Both languages follow it. The engine (sdpcore, preload) and sdpstat parse
// through Parse; the shim parses through shim/settings.h, which CHeader
// generates from this table (TestCHeader fails when the checked-in header
// is stale), with the same grammar written once in C (shim/config.c,
// setting_parse). tests/settings_test.go feeds the same inputs to both and
// holds the README's table to this one.
//
// The grammar, per kind:
//   - Int: a decimal integer with an optional sign, within [Min, Max] and a
//     multiple of Multiple when that is set;
//   - Bool: 0 or 1, also off|on, no|yes, false|true;
//   - Enum: one of Values, or with Numeric also a value's index as a digit;
//   - Text: any string, read as it is (paths, lists with grammars of their own);
//   - Flag: set (even to an empty string) or not.
//
// Spaces around an Int, Bool or Enum value are ignored, and words are
// matched without regard to ASCII case. An unset or empty value is the
// default; anything else that does not fit is reported once, as
// `NAME="value" is not <grammar>; using <default>`, and the default is used.
package settings

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is a setting's grammar.
type Kind uint8

// Kinds of settings.
const (
	Int Kind = iota
	Bool
	Enum
	Text
	Flag
)

// Reader is a part of libsdp that reads a setting from its environment.
type Reader uint8

// Readers, or'ed together in Setting.Readers.
const (
	Shim    Reader = 1 << iota // the shim (shim/config.c), when the process starts
	Engine                     // the Go engine, when it loads
	Sdpstat                    // sdpstat, from another process's environment
)

// Setting is one environment variable.
type Setting struct {
	Name    string
	Kind    Kind
	Default string // Int, Bool, Enum: a valid value; Text, Flag: what unset means, as the README says it
	// Int: the range, and a step the value must be a multiple of (0: any).
	Min, Max, Multiple int64
	Values             []string // Enum: the words, their codes are their indices
	Numeric            bool     // Enum: a code as a digit is accepted too
	Readers            Reader
	TestOnly           bool // a switch for tests, left out of the README's table
	Meaning            string
}

// The settings, in the order of the README's table.
var (
	Mode = &Setting{Name: "SDP_MODE", Kind: Enum, Default: "both", Values: []string{"both", "sdp", "tcp"},
		Readers: Shim, Meaning: "the rule when none matches: SDP with TCP fallback, SDP only, or TCP only"}
	PortOffset = &Setting{Name: "SDP_PORT_OFFSET", Kind: Int, Default: "20000", Min: 1, Max: 64511,
		Readers: Shim | Sdpstat, Meaning: "the SDP listener of port P is on P + offset, wrapped into 1024..65535"}
	ConnectTimeout = &Setting{Name: "SDP_CONNECT_TIMEOUT", Kind: Int, Default: "2000", Min: 1, Max: 600000,
		Readers: Shim, Meaning: "milliseconds a connect waits for the MPA Request before TCP (the engine gets it from the shim)"}
	HandshakeTimeout = &Setting{Name: "SDP_HANDSHAKE_TIMEOUT", Kind: Int, Default: "10000", Min: 1, Max: 3600000,
		Readers: Engine, Meaning: "milliseconds an accepted connection waits for the MPA Reply and HelloAck"}
	LogLevel = &Setting{Name: "SDP_LOG_LEVEL", Kind: Enum, Default: "warn", Values: []string{"error", "warn", "info", "debug"},
		Numeric: true, Readers: Shim, Meaning: "how much is logged (the engine gets it from the shim)"}
	LogFile = &Setting{Name: "SDP_LOG_FILE", Kind: Text, Default: "stderr",
		Readers: Shim, Meaning: "the log file; %p is the process id"}
	Stats = &Setting{Name: "SDP_STATS", Kind: Bool, Default: "0",
		Readers: Shim, Meaning: "one statistics line in the log at exit"}
	Markers = &Setting{Name: "SDP_MARKERS", Kind: Bool, Default: "1",
		Readers: Shim, Meaning: "ask the peer for MPA markers (the engine gets it from the shim)"}
	CRC = &Setting{Name: "SDP_CRC", Kind: Bool, Default: "1",
		Readers: Shim, Meaning: "ask for CRC32c (the engine gets it from the shim)"}
	MarkerSpacing = &Setting{Name: "SDP_MARKER_SPACING", Kind: Int, Default: "512", Min: 64, Max: 65532, Multiple: 4,
		Readers: Shim, Meaning: "octets between MPA markers (the engine gets it from the shim)"}
	BufSize = &Setting{Name: "SDP_BUF_SIZE", Kind: Int, Default: "65536", Min: 1040, Max: 1 << 20,
		Readers: Shim, Meaning: "bytes per SDP receive buffer (the engine gets it from the shim)"}
	RecvBufs = &Setting{Name: "SDP_RECV_BUFS", Kind: Int, Default: "16", Min: 4, Max: 1024,
		Readers: Shim, Meaning: "receive buffers per connection, the credits granted (the engine gets it from the shim)"}
	FPDUAlign = &Setting{Name: "SDP_FPDU_ALIGN", Kind: Enum, Default: "off", Values: []string{"off", "on", "auto"},
		Numeric: true, Readers: Shim, Meaning: "each FPDU fits and starts a TCP segment: on none (FPDUs up to 64 KiB), on every connection, or (auto) on those that leave the host (the engine gets it from the shim)"}
	FlowControl = &Setting{Name: "SDP_FLOW_CONTROL", Kind: Enum, Default: "credit",
		Values:  []string{"credit", "rdma", "nic", "transport"}, // codes as in the Hello
		Readers: Shim | Engine, Meaning: "flow control asked for in the Hello (shim) and run (engine)"}
	Buffering = &Setting{Name: "SDP_BUFFERING", Kind: Enum, Default: "integrated", Values: []string{"integrated", "separate"},
		Readers: Engine, Meaning: "one or two user-space copies per byte of a buffer-copy transfer"}
	Progress = &Setting{Name: "SDP_PROGRESS", Kind: Enum, Default: "inline", Values: []string{"inline", "async"},
		Readers: Engine, Meaning: "whether a goroutine per connection moves data between the program's calls"}
	ZCopyThreshold = &Setting{Name: "SDP_ZCOPY_THRESHOLD", Kind: Int, Default: "0", Min: 0, Max: math.MaxInt64,
		Readers: Shim | Engine, Meaning: "bytes from which a blocking call goes by zero copy (shim: which calls wait; engine: which sends); 0: never"}
	SharedMemory = &Setting{Name: "SDP_SHM", Kind: Bool, Default: "1",
		Readers: Shim | Engine, Meaning: "between two processes on this host, move SDP's messages through shared memory instead of TCP (shim: asked for in the Hello; engine: offered and taken)"}
	ShortTCP = &Setting{Name: "SDP_SHORT_TCP", Kind: Bool, Default: "1",
		Readers: Shim, Meaning: "a connecting process whose last connections to a peer each carried little makes its next ones there over plain TCP"}
	PollUS = &Setting{Name: "SDP_POLL_US", Kind: Int, Default: "50", Min: 0, Max: 1000000,
		Readers: Engine, Meaning: "most microseconds a blocking call on a shared-memory connection polls the ring before it sleeps (each connection adapts within it); 0: never polls"}
	TrustRemote = &Setting{Name: "SDP_TRUST_REMOTE", Kind: Text, Default: "unset (no other host)",
		Readers: Shim, Meaning: "other hosts whose SDP ports are trusted (shim/trust.c parses it)"}
	MaxConnections = &Setting{Name: "SDP_MAX_CONNECTIONS", Kind: Int, Default: "0", Min: 0, Max: 65536,
		Readers: Shim, Meaning: "SDP connections a process may have; 0: no cap (at most the shim's descriptor table)"}
	EnginePath = &Setting{Name: "SDP_ENGINE", Kind: Text, Default: "next to `libsdp.so`",
		Readers: Shim, Meaning: "path of libsdp-engine.so"}
	ConfigFile = &Setting{Name: "SDP_CONFIG_FILE", Kind: Text, Default: "`/etc/libsdp.conf`",
		Readers: Shim, Meaning: "the rules file"}
	ConfigFileOFED = &Setting{Name: "LIBSDP_CONFIG_FILE", Kind: Text, Default: "`/etc/libsdp.conf`",
		Readers: Shim, Meaning: "OFED's name for SDP_CONFIG_FILE, read when that is unset or empty"}
	SimpleLibSDP = &Setting{Name: "SIMPLE_LIBSDP", Kind: Flag, Default: "unset",
		Readers: Shim, Meaning: "OFED's switch: SDP for every connection, rules ignored"}
	AlwaysUseSDP = &Setting{Name: "ALWAYS_USE_SDP", Kind: Flag, Default: "unset",
		Readers: Shim, Meaning: "OFED's other name for SIMPLE_LIBSDP"}
	TestPanic = &Setting{Name: "SDP_TEST_PANIC", Kind: Text, Default: "unset", TestOnly: true,
		Readers: Engine, Meaning: "<send|recv|poll|any>:<n>: the engine panics in its n-th call of that kind (fault injection)"}
)

// All is every setting, in the README's order.
var All = []*Setting{Mode, PortOffset, ConnectTimeout, HandshakeTimeout, LogLevel, LogFile, Stats,
	Markers, CRC, MarkerSpacing, BufSize, RecvBufs, FPDUAlign, FlowControl, Buffering, Progress,
	ZCopyThreshold, SharedMemory, ShortTCP, PollUS, TrustRemote, MaxConnections, EnginePath, ConfigFile, ConfigFileOFED,
	SimpleLibSDP, AlwaysUseSDP, TestPanic}

// Lookup returns the setting called name, or nil.
func Lookup(name string) *Setting {
	for _, s := range All {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Parsed reports whether the setting has a value Parse reads (Int, Bool, Enum).
func (s *Setting) Parsed() bool { return s.Kind == Int || s.Kind == Bool || s.Kind == Enum }

// Error is a value that does not fit its setting's grammar.
type Error struct {
	Setting *Setting
	Value   string
}

func (e *Error) Error() string {
	// The value as it is, not quoted by Go's rules: the shim writes it so.
	return fmt.Sprintf("%s=\"%s\" is not %s; using %s", e.Setting.Name, e.Value, e.Setting.Grammar(), e.Setting.Default)
}

// Grammar describes the values the setting accepts, for the warning.
func (s *Setting) Grammar() string {
	switch s.Kind {
	case Int:
		g := "a decimal integer"
		if s.Multiple > 1 {
			g = fmt.Sprintf("a multiple of %d", s.Multiple)
		}
		if s.Max == math.MaxInt64 {
			return fmt.Sprintf("%s >= %d", g, s.Min)
		}
		return fmt.Sprintf("%s from %d to %d", g, s.Min, s.Max)
	case Bool:
		return "0 or 1"
	case Enum:
		g := "one of " + strings.Join(s.Values, "|")
		if s.Numeric {
			g += fmt.Sprintf(" or 0-%d", len(s.Values)-1)
		}
		return g
	}
	return "text"
}

// Def is the default's code (as Parse returns it).
func (s *Setting) Def() int64 {
	n, err := s.parse(s.Default)
	if err != nil {
		panic(s.Name + ": bad default " + s.Default) // caught by TestTable
	}
	return n
}

// Parse returns the code of v (Int: the number; Bool: 0 or 1; Enum: the
// word's index). Unset or empty is the default; a value that does not fit
// is the default and an *Error to report.
func (s *Setting) Parse(v string) (int64, error) {
	if v == "" {
		return s.Def(), nil
	}
	n, err := s.parse(v)
	if err != nil {
		return s.Def(), err
	}
	return n, nil
}

// Get parses the setting as getenv reports it.
func (s *Setting) Get(getenv func(string) string) (int64, error) {
	return s.Parse(getenv(s.Name))
}

// boolWords are the words of a Bool, by code.
var boolWords = [2][]string{{"0", "off", "no", "false"}, {"1", "on", "yes", "true"}}

// space is C's isspace in the C locale, so that both sides trim the same.
const space = " \t\n\v\f\r"

func (s *Setting) parse(v string) (int64, error) {
	bad := &Error{Setting: s, Value: v}
	w := strings.Trim(v, space)
	switch s.Kind {
	case Int:
		n, err := strconv.ParseInt(w, 10, 64) // strtol's grammar: sign, digits
		if err != nil || n < s.Min || n > s.Max || (s.Multiple > 1 && n%s.Multiple != 0) {
			return 0, bad
		}
		return n, nil
	case Bool:
		for code, words := range boolWords {
			for _, word := range words {
				if asciiEqualFold(w, word) {
					return int64(code), nil
				}
			}
		}
		return 0, bad
	case Enum:
		for i, name := range s.Values {
			if asciiEqualFold(w, name) {
				return int64(i), nil
			}
		}
		if s.Numeric && len(w) == 1 && w[0] >= '0' && int(w[0]-'0') < len(s.Values) {
			return int64(w[0] - '0'), nil
		}
		return 0, bad
	}
	return 0, nil
}

// asciiEqualFold is C's strcasecmp in the C locale: strings.EqualFold
// would also match Unicode folds such as "ſ" for "s", which the shim does not.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// Format writes a code as the settings line shows it: an Enum's word, a
// number otherwise.
func (s *Setting) Format(n int64) string {
	if s.Kind == Enum && n >= 0 && n < int64(len(s.Values)) {
		return s.Values[n]
	}
	return strconv.FormatInt(n, 10)
}

// Value is a setting with the code it was read as.
type Value struct {
	Setting *Setting
	Code    int64
}

// Line is the settings line each side logs at debug level after reading
// its settings: "NAME=value NAME=value ...", in the order given.
func Line(vs []Value) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v.Setting.Name + "=" + v.Setting.Format(v.Code))
	}
	return b.String()
}
