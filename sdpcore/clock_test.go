package sdpcore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeroTimeReadsTheClock: the zero Time that the preload passes on its
// hot paths means the clock's time wherever a timer is set or checked. A
// cork set with it runs out corkMax later, not at once (a time in year 1)
// and not never (a zero time is before every deadline).
func TestZeroTimeReadsTheClock(t *testing.T) {
	require.False(t, orNow(time.Time{}).IsZero())
	given := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, given, orNow(given), "a caller's time is kept")

	a, p := connPair(t, testConfig())
	oneWay(t, p, a, 1)
	t0 := time.Now()
	n, err := p.SendFlags([][]byte{[]byte("held")}, SendMore, time.Time{})
	t1 := time.Now()
	require.NoError(t, err)
	require.Equal(t, 4, n)
	p.mu.Lock()
	until := p.corkUntil
	p.mu.Unlock()
	require.False(t, until.Before(t0.Add(corkMax)), "cork until %v, set after %v", until, t0)
	require.False(t, until.After(t1.Add(corkMax)), "cork until %v, set before %v", until, t1)

	// A zero-time call after the cork ran out sends what it held.
	p.mu.Lock()
	p.corkUntil = time.Now().Add(-time.Millisecond)
	p.mu.Unlock()
	_, _, _, err = p.Poll(EvOut, time.Time{})
	require.NoError(t, err)
	got := readFor(t, a, 4, time.Now().Add(10*time.Second))
	require.Equal(t, "held", string(got))

	// A connecting side's handshake deadline, from a zero time too.
	cfd, _ := tcpPair(t)
	c := NewActive(cfd, testConfig(), time.Time{})
	closeAtCleanup(t, c)
	require.WithinDuration(t, time.Now().Add(testConfig().ConnectTimeout), c.deadline, time.Minute)
}

// TestTimersReadTheClockThroughOrNow: a function of sdpcore that takes the
// call's time (now time.Time) may be given the zero Time by the preload, so
// it may only hand now on to another function (orNow among them) unless it
// first sets now = orNow(now). Read directly (now.Before, x.After(now),
// now stored in a field), the zero Time is year 1: a timer set with it
// fires at once, one checked with it never. This finds such a use in the
// package's sources, which no single behaviour test would.
func TestTimersReadTheClockThroughOrNow(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	timeMethods := map[string]bool{"Before": true, "After": true, "Sub": true, "Add": true, "Equal": true, "Compare": true}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !takesNow(fn) {
				continue
			}
			checked++
			uses, handed, reset := 0, 0, false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					if len(n.Lhs) == 1 && isNow(n.Lhs[0]) {
						reset = true // now = orNow(now), or a time of its own
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && timeMethods[sel.Sel.Name] {
						return true // x.Before(now): a read, counted below
					}
					for _, a := range n.Args {
						if isNow(a) {
							handed++
						}
					}
				case *ast.Ident:
					if n.Name == "now" {
						uses++
					}
				}
				return true
			})
			if !reset {
				assert.Equal(t, handed, uses, "%s: %s reads now directly; read it through orNow", fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	}
	require.Greater(t, checked, 20, "the functions that take now were found")
}

// takesNow says whether fn has a parameter now of type time.Time.
func takesNow(fn *ast.FuncDecl) bool {
	for _, p := range fn.Type.Params.List {
		sel, ok := p.Type.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Time" {
			continue
		}
		for _, n := range p.Names {
			if n.Name == "now" {
				return true
			}
		}
	}
	return false
}

func isNow(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "now"
}
