package settings

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// HeaderPath is where the shim's copy of the table lives, from the
// repository's root.
const HeaderPath = "shim/settings.h"

// CID is the name of s in C: SDP_PORT_OFFSET is SET_PORT_OFFSET.
func (s *Setting) CID() string { return "SET_" + strings.TrimPrefix(s.Name, "SDP_") }

// CHeader is shim/settings.h: the settings the shim reads, with everything
// its parser needs. The shim includes it and nothing else of Go's.
func CHeader() []byte {
	var b bytes.Buffer
	b.WriteString(`/* Code generated from internal/settings/settings.go; DO NOT EDIT.
 * go test ./internal/settings -run TestCHeader -update writes it again.
 *
 * The settings the shim reads from its environment, with the defaults and
 * ranges of the one table; shim/config.c's setting_parse is the grammar
 * (internal/settings, package comment). */
#ifndef SDP_SHIM_SETTINGS_H
#define SDP_SHIM_SETTINGS_H

enum setting_kind { SETTING_INT, SETTING_BOOL, SETTING_ENUM, SETTING_TEXT, SETTING_FLAG };
enum setting_reader { READ_SHIM = 1, READ_ENGINE = 2, READ_SDPSTAT = 4 };

enum setting_id {
`)
	shim := ReadBy(Shim)
	for _, s := range shim {
		fmt.Fprintf(&b, "\t%s, /* %s */\n", s.CID(), s.Name)
	}
	b.WriteString("\tSET_COUNT\n};\n\n/* Defaults and ranges as constants, for static initialisers. */\n")
	for _, s := range shim {
		if s.Parsed() {
			fmt.Fprintf(&b, "#define %s_DEFAULT %s\n", s.CID(), cLong(s.Def()))
		}
		if s.Kind == Int {
			fmt.Fprintf(&b, "#define %s_MIN %s\n#define %s_MAX %s\n", s.CID(), cLong(s.Min), s.CID(), cLong(s.Max))
		}
	}
	fmt.Fprintf(&b, `
struct setting {
	const char *name;
	enum setting_kind kind;
	int readers;         /* enum setting_reader, or'ed */
	long def, min, max;  /* def: the default's code */
	long multiple;       /* Int: the value is a multiple of this (0: any) */
	const char *values[%d]; /* Enum: the words; a word's code is its index */
	int numeric;         /* Enum: a code written as a digit is accepted too */
	const char *grammar; /* for the warning: "... is not <grammar>; using <def_text>" */
	const char *def_text;
};

static const struct setting settings[SET_COUNT] = {
`, maxValues())
	for _, s := range shim {
		fmt.Fprintf(&b, "\t[%s] = { %s, %s, %s,\n\t\t%s, %s, %s, %s,\n\t\t{ %s }, %d, %s, %s },\n",
			s.CID(), strconv.Quote(s.Name), cKind[s.Kind], cReaders(s.Readers),
			cDefault(s), cLong(s.Min), cLong(s.Max), cLong(s.Multiple),
			cStrings(s.Values), b2i(s.Numeric), strconv.Quote(s.Grammar()), strconv.Quote(s.Default))
	}
	b.WriteString("};\n\n#endif\n")
	return b.Bytes()
}

// ReadBy returns the settings r reads, in the table's order.
func ReadBy(r Reader) []*Setting {
	var out []*Setting
	for _, s := range All {
		if s.Readers&r != 0 {
			out = append(out, s)
		}
	}
	return out
}

var cKind = map[Kind]string{Int: "SETTING_INT", Bool: "SETTING_BOOL", Enum: "SETTING_ENUM", Text: "SETTING_TEXT", Flag: "SETTING_FLAG"}

func cReaders(r Reader) string {
	var parts []string
	for _, x := range []struct {
		r    Reader
		name string
	}{{Shim, "READ_SHIM"}, {Engine, "READ_ENGINE"}, {Sdpstat, "READ_SDPSTAT"}} {
		if r&x.r != 0 {
			parts = append(parts, x.name)
		}
	}
	return strings.Join(parts, " | ")
}

func cDefault(s *Setting) string {
	if s.Parsed() {
		return s.CID() + "_DEFAULT"
	}
	return "0"
}

// cLong is n as a C long constant (the shim is built for LP64 systems).
func cLong(n int64) string {
	if n == math.MaxInt64 {
		return "LONG_MAX"
	}
	return strconv.FormatInt(n, 10) + "L"
}

func cStrings(vs []string) string {
	if len(vs) == 0 {
		return "0"
	}
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

func maxValues() int {
	n := 1
	for _, s := range All {
		n = max(n, len(s.Values))
	}
	return n
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
