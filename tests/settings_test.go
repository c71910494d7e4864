package tests

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"libsdp/internal/settings"
	"libsdp/iwarp"
	"libsdp/sdpcore"
)

// The environment settings are one table (internal/settings). The shim parses them in C from
// shim/settings.h, generated from that table; the engine and sdpstat parse them in Go. These
// tests give both parsers the same inputs, through the real shim and the real engine, and hold
// the README's table of variables to the settings table.

// settingInput is one input given to every setting under test: a fixed string, or one made
// from the setting (its range ends, its words).
type settingInput struct {
	name string
	of   func(s *settings.Setting) string
}

func fixedInput(v string) settingInput {
	return settingInput{strconv.Quote(v), func(*settings.Setting) string { return v }}
}

// settingInputs are well formed values and not: units, signs, spaces, hex, empty, garbage,
// values too large for a long, Unicode spaces and case folds that only Go's Unicode-aware
// functions would take, and each setting's own boundaries and words.
func settingInputs() []settingInput {
	ins := []settingInput{}
	for _, v := range []string{"64k", "-1", " 10 ", "0x10", "", " ", "garbage", "99999999999999999999",
		"9223372036854775808", "+7", "1e3", "1_000", "0", "1", "4", " ON ", "10\u00a0", "\u200910", "tranſport"} {
		ins = append(ins, fixedInput(v))
	}
	word := func(s *settings.Setting, i int) string { return s.Values[(i+len(s.Values))%len(s.Values)] }
	num := func(n int64) string { return strconv.FormatInt(n, 10) }
	return append(ins,
		byKind("lowest", func(s *settings.Setting) string { return num(s.Min) }, "off",
			func(s *settings.Setting) string { return " " + strings.ToUpper(word(s, 0)) + "\t" }),
		byKind("highest", func(s *settings.Setting) string { return num(s.Max) }, " True ",
			func(s *settings.Setting) string { return word(s, -1) }),
		byKind("below", func(s *settings.Setting) string { return num(s.Min - 1) }, "offf",
			func(s *settings.Setting) string { return word(s, 0) + "x" }),
		byKind("above", func(s *settings.Setting) string {
			if s.Max > 1<<62 {
				return "9223372036854775808" // LONG_MAX + 1
			}
			return num(s.Max + 1)
		}, "yes", func(s *settings.Setting) string { return strconv.Itoa(len(s.Values)) }),
		byKind("next", func(s *settings.Setting) string { return num(s.Min + 1) }, "NO",
			func(s *settings.Setting) string { return strings.ToUpper(word(s, 1)) }),
	)
}

// byKind is an input made by kind: from an Int's range, a fixed Bool word, from an Enum's words.
func byKind(name string, ofInt func(*settings.Setting) string, ofBool string, ofEnum func(*settings.Setting) string) settingInput {
	return settingInput{name, func(s *settings.Setting) string {
		switch s.Kind {
		case settings.Int:
			return ofInt(s)
		case settings.Bool:
			return ofBool
		}
		return ofEnum(s)
	}}
}

// settingsLine is the "settings (side): NAME=value ..." line of a log, as a map.
func settingsLine(t *testing.T, log, side string) map[string]string {
	t.Helper()
	m := regexp.MustCompile(`settings \(` + side + `\): (.*)`).FindStringSubmatch(log)
	require.NotNil(t, m, "no settings line of the %s in the log:\n%s", side, log)
	out := map[string]string{}
	for _, kv := range strings.Fields(m[1]) {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// checkSetting asserts that a side read value v of s as the reference (settings.Parse) does:
// the same value in its settings line and, for a bad value, the reference's warning in its log
// (ending in suffix), or no warning for a good one.
func checkSetting(t *testing.T, log string, line map[string]string, s *settings.Setting, v, suffix, side string) {
	t.Helper()
	n, err := s.Parse(v)
	assert.Equal(t, s.Format(n), line[s.Name], "%s=%q: the value the %s read", s.Name, v, side)
	if err != nil {
		assert.Contains(t, log, "]: "+err.Error()+suffix+"\n", "%s=%q: the %s's warning", s.Name, v, side)
	} else {
		assert.NotContains(t, log, "]: "+s.Name+"=\"", "%s=%q: a warning from the %s for a good value", s.Name, v, side)
	}
}

// sharedSuffix is what the shim adds to the warning of a setting the engine reads too (and
// reports itself): the shim's is a debug line.
func sharedSuffix(s *settings.Setting) string {
	if s.Readers&settings.Engine != 0 {
		return " (shim)"
	}
	return ""
}

// TestSettingsShim runs a preloaded /bin/true with every setting the shim parses (but
// SDP_LOG_LEVEL, which must stay debug for the shim's settings line) set to each input, and
// holds the shim's settings line and warnings to the reference parser.
func TestSettingsShim(t *testing.T) {
	shim, ctx := setup(t)
	trueBin, err := exec.LookPath("true")
	require.NoError(t, err)
	for _, in := range settingInputs() {
		t.Run(in.name, func(t *testing.T) {
			dir := t.TempDir()
			env := append(sdpEnv(shim, filepath.Join(dir, "true.%p.log")), "SDP_LOG_LEVEL=debug")
			var under []*settings.Setting
			for _, s := range settings.ReadBy(settings.Shim) {
				if s.Parsed() && s != settings.LogLevel {
					under = append(under, s)
					env = append(env, s.Name+"="+in.of(s))
				}
			}
			runTrue(ctx, t, env, trueBin)
			log := globText(t, filepath.Join(dir, "*.log"))
			line := settingsLine(t, log, "shim")
			for _, s := range under {
				checkSetting(t, log, line, s, in.of(s), sharedSuffix(s), "shim")
			}
		})
	}
}

// TestSettingsLogLevel: SDP_LOG_LEVEL decides whether the shim's settings line (debug) is
// written at all, so its inputs are checked by that line's presence and by the warning.
func TestSettingsLogLevel(t *testing.T) {
	shim, ctx := setup(t)
	trueBin, err := exec.LookPath("true")
	require.NoError(t, err)
	s := settings.LogLevel
	for _, in := range settingInputs() {
		t.Run(in.name, func(t *testing.T) {
			dir := t.TempDir()
			v := in.of(s)
			// A bad SDP_LOG_LEVEL is said on stderr: the log file is opened after it is read.
			out := runTrue(ctx, t, append(sdpEnv(shim, filepath.Join(dir, "true.%p.log")), s.Name+"="+v), trueBin)
			log := out + globText(t, filepath.Join(dir, "*.log"))
			n, perr := s.Parse(v)
			assert.Equal(t, n == 3, strings.Contains(log, "settings (shim): "), "%s=%q: debug or not", s.Name, v)
			if perr != nil {
				assert.Contains(t, log, "]: "+perr.Error()+"\n")
			} else {
				assert.NotContains(t, log, "]: "+s.Name+"=\"")
			}
		})
	}
}

// runTrue runs a program with env, waits for it and returns its output.
func runTrue(ctx context.Context, t *testing.T, env []string, prog string, args ...string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, prog, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s", prog, out)
	return string(out)
}

// TestSettingsAgree starts a preloaded listener with every setting the engine reads set to
// each input and connects plainly to its SDP port, so that the shim writes its Hello and the
// engine loads. The engine's settings line and warnings must be the reference parser's; for
// the settings both sides read (SDP_FLOW_CONTROL: the shim writes it into the Hello, the
// engine runs it; SDP_ZCOPY_THRESHOLD: the shim decides which calls may wait for zero copy,
// the engine which sends use it) the shim's must be too, and its Hello must say the same.
func TestSettingsAgree(t *testing.T) {
	shim, ctx := setup(t)
	engine := settings.ReadBy(settings.Engine)
	for _, in := range settingInputs() {
		t.Run(in.name, func(t *testing.T) {
			hc := helloCase{listen: "127.0.0.1", dial: "127.0.0.1", env: []string{"SDP_LOG_LEVEL=debug"},
				waitLog: "settings (engine)"}
			var under []*settings.Setting
			for _, s := range engine {
				if s.Parsed() {
					under = append(under, s)
					hc.env = append(hc.env, s.Name+"="+in.of(s))
				}
			}
			dir := t.TempDir()
			got, _, _ := helloExchange(ctx, t, shim, dir, hc)
			log := globText(t, filepath.Join(dir, "*.log"))
			shimLine, engineLine := settingsLine(t, log, "shim"), settingsLine(t, log, "engine")
			for _, s := range under {
				checkSetting(t, log, engineLine, s, in.of(s), "", "engine")
				if s.Readers&settings.Shim != 0 {
					checkSetting(t, log, shimLine, s, in.of(s), sharedSuffix(s), "shim")
				}
			}
			f, _, err := iwarp.ParseMPAFrame(got, false)
			require.NoError(t, err)
			h, err := sdpcore.ParseHello(f.PrivateData)
			require.NoError(t, err)
			assert.Equal(t, engineLine[settings.FlowControl.Name], h.FlowControl.String(), "flow control: engine and the shim's Hello")
			assert.Equal(t, engineLine[settings.ZCopyThreshold.Name] != "0", h.Cap&sdpcore.CapWriteZCopy != 0,
				"Write ZCopy offered iff zero copy is on")
		})
	}
}

// TestSettingsREADME: the README's table of environment variables lists exactly the settings
// of the table (but the switches for tests), each with the table's default, an Int's range
// ("Min to Max", unless it has no upper bound) and an Enum's words.
func TestSettingsREADME(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	rows := readmeEnvRows(t, string(readme))
	for _, s := range settings.All {
		row, listed := rows[s.Name]
		if s.TestOnly {
			assert.False(t, listed, "%s is a switch for tests, not for the README's table", s.Name)
			continue
		}
		if !assert.True(t, listed, "%s is not in the README's table", s.Name) {
			continue
		}
		delete(rows, s.Name)
		def, meaning := row[0], row[1]
		switch s.Kind {
		case settings.Int, settings.Bool, settings.Enum:
			ok := def == "`"+s.Default+"`" || strings.HasPrefix(def, "`"+s.Default+"` (")
			assert.True(t, ok, "%s: README's default %q, the table's `%s`", s.Name, def, s.Default)
		default:
			assert.Equal(t, s.Default, def, "%s: README's default", s.Name)
		}
		if s.Kind == settings.Int && s.Max != math.MaxInt64 {
			assert.Contains(t, meaning, fmt.Sprintf("%d to %d", s.Min, s.Max), "%s: README's range", s.Name)
		}
		for _, w := range s.Values {
			assert.Contains(t, meaning, "`"+w+"`", "%s: README's words", s.Name)
		}
	}
	assert.Empty(t, rows, "in the README's table, not in internal/settings")
}

// readmeEnvRows maps each variable of the README's table under "## Environment variables" to
// its Default and Meaning cells; a row may name several variables ("`A`, `B`").
func readmeEnvRows(t *testing.T, readme string) map[string][2]string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Environment variables\n")
	require.True(t, ok, "no Environment variables section in the README")
	section, _, _ = strings.Cut(section, "\n#")
	rows := map[string][2]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		for _, name := range strings.Split(strings.TrimPrefix(cells[0], "| "), ", ") {
			rows[strings.Trim(name, "`")] = [2]string{cells[1], strings.Join(cells[2:], " | ")}
		}
	}
	require.NotEmpty(t, rows, "no table rows in the README's Environment variables section")
	return rows
}

// TestSettingsReadThroughTable: no part of the product reads a setting by a name of its own,
// around the table (which would leave it out of these tests): the shim's C files read the
// environment through shim/settings.h, the Go code through internal/settings.
func TestSettingsReadThroughTable(t *testing.T) {
	cFiles, err := filepath.Glob(filepath.Join("..", "shim", "*.c"))
	require.NoError(t, err)
	cFiles = append(cFiles, filepath.Join("..", "shim.c"))
	direct := regexp.MustCompile(`getenv\("[A-Z_]*SDP[A-Z_]*"\)|Getenv\("[A-Z_]*SDP[A-Z_]*"\)`)
	var goFiles []string
	for _, dir := range []string{"preload", "sdpcore", "iwarp", "internal", "cmd"} {
		require.NoError(t, filepath.WalkDir(filepath.Join("..", dir), func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				goFiles = append(goFiles, p)
			}
			return err
		}))
	}
	for _, f := range append(cFiles, goFiles...) {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Empty(t, direct.FindAllString(string(data), -1), "%s reads a setting around the table", f)
	}
}
