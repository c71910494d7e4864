package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"libsdp/internal/statsfile"
)

// lineKeys returns the keys of a key=value line, in order.
func lineKeys(line string) []string {
	var keys []string
	for _, kv := range strings.Fields(line) {
		if k, _, ok := strings.Cut(kv, "="); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

func fieldNames() []string {
	var names []string
	for _, f := range statsfile.LineFields {
		names = append(names, f.Name)
	}
	return names
}

// TestStatsLineFields checks that the engine's statistics line has exactly
// the keys of statsfile.LineFields, in that order, and that the counters
// (not the settings) parse into Process.Totals.
func TestStatsLineFields(t *testing.T) {
	line := statsLine()
	if got, want := strings.Join(lineKeys(line), " "), strings.Join(fieldNames(), " "); got != want {
		t.Fatalf("the stats line's keys\n  %s\nare not statsfile.LineFields\n  %s", got, want)
	}
	totals := statsfile.ParseKeyValues(line)
	for _, f := range statsfile.LineFields {
		if _, ok := totals[f.Name]; ok == f.Setting {
			t.Errorf("%s: in Totals %t, but Setting is %t", f.Name, ok, f.Setting)
		}
		if f.Meaning == "" {
			t.Errorf("%s has no meaning", f.Name)
		}
	}
}

// shimDefaultRe finds the interposer's all-zero engine line in the shim: the
// initial value of eng_line, two adjacent string literals.
var shimDefaultRe = regexp.MustCompile(`eng_line\[\d+\]\s*=\s*((?:"[^"]*"\s*)+);`)

// TestShimDefaultStatsLine checks that the line the shim prints when the
// engine is not loaded names the engine's counters, in the engine's order.
// It carries only the first of them (sdp_conns through payload_rx); a key
// it has that the engine's line lacks, or one out of order, fails.
func TestShimDefaultStatsLine(t *testing.T) {
	files, err := filepath.Glob("../shim/*.c")
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, f := range append(files, "../shim.c") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	m := shimDefaultRe.FindSubmatch(src)
	if m == nil {
		t.Fatal("no eng_line default in the shim (shim.c, shim/*.c)")
	}
	line := strings.Join(regexp.MustCompile(`"([^"]*)"`).FindAllString(string(m[1]), -1), "")
	line = strings.ReplaceAll(line, `"`, "")
	keys := lineKeys(line)
	names := fieldNames()
	if len(keys) == 0 || len(keys) > len(names) {
		t.Fatalf("the shim's default line %q", line)
	}
	for i, k := range keys {
		if k != names[i] {
			t.Fatalf("the shim's default line has %s at position %d where the engine's has %s:\n  shim:   %s\n  engine: %s",
				k, i, names[i], strings.Join(keys, " "), strings.Join(names, " "))
		}
	}
	for _, kv := range strings.Fields(line) {
		if !strings.HasSuffix(kv, "=0") {
			t.Errorf("the shim's default line: %s is not zero", kv)
		}
	}
}

// TestREADMEStatsLine checks that the statistics line README shows has
// only keys the interposer (pid, prog, tcp_conns, engine) or the engine
// prints.
func TestREADMEStatsLine(t *testing.T) {
	src, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^libsdp: stats (.*)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("README shows no stats line")
	}
	known := map[string]bool{"pid": true, "prog": true, "tcp_conns": true, "engine": true}
	for _, n := range fieldNames() {
		known[n] = true
	}
	for _, k := range lineKeys(string(m[1])) {
		if !known[k] {
			t.Errorf("README's stats line has %s, which no one prints", k)
		}
	}
}

// TestStatsLineFitsShim checks that the engine's line, every counter at its
// largest (20 digits), fits the buffer the shim gives it at exit (eng_line):
// a longer line loses its last fields (panics among them) without a word.
func TestStatsLineFitsShim(t *testing.T) {
	b, err := os.ReadFile("../shim/exec.c")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`char eng_line\[(\d+)\]`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no eng_line buffer in shim/exec.c")
	}
	size, err := strconv.Atoi(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range statsfile.LineFields {
		n += len(f.Name) + len("=") + len(" ")
		if f.Setting {
			n += len("integrated") // the longest mode's name
		} else {
			n += len("18446744073709551615")
		}
	}
	if n >= size {
		t.Fatalf("the engine's line can take %d octets; the shim's buffer has %d", n, size)
	}
}
