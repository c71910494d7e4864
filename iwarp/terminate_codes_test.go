package iwarp

import (
	"go/ast"
	"go/build"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/printer"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// termClass is one Terminate classification: Layer, EType, Error Code.
type termClass struct{ layer, etype, code uint8 }

// rfcTerminateTable is every classification the RFCs define, copied from
// their tables as numbers (not from the constants, which it checks):
// RFC 5040 §4.8 (Layer 0), RFC 5041 §7.2 (Layer 1), RFC 5044 §8 and
// RFC 6581 §8 (Layer 2), as the IANA RDDP registries of RFC 6580 §3 (and
// RFC 6581 §11) list them. A local catastrophic RDMAP error may carry any
// code; 0xFF is the one this stack sends.
var rfcTerminateTable = map[termClass]string{
	{0, 0, 0xFF}: "RDMAP local catastrophic error",
	{0, 1, 0x00}: "RDMAP remote protection error: invalid STag",
	{0, 1, 0x01}: "RDMAP remote protection error: base or bounds violation",
	{0, 1, 0x02}: "RDMAP remote protection error: access rights violation",
	{0, 1, 0x03}: "RDMAP remote protection error: STag not associated with RDMAP stream",
	{0, 1, 0x04}: "RDMAP remote protection error: TO wrap",
	{0, 1, 0x09}: "RDMAP remote protection error: STag cannot be invalidated",
	{0, 1, 0xFF}: "RDMAP remote protection error: unspecified",
	{0, 2, 0x05}: "RDMAP remote operation error: invalid RDMAP version",
	{0, 2, 0x06}: "RDMAP remote operation error: unexpected opcode",
	{0, 2, 0x07}: "RDMAP remote operation error: catastrophic error, localized to RDMAP stream",
	{0, 2, 0x08}: "RDMAP remote operation error: catastrophic error, global",
	{0, 2, 0x09}: "RDMAP remote operation error: STag cannot be invalidated",
	{0, 2, 0xFF}: "RDMAP remote operation error: unspecified",
	{1, 0, 0x00}: "DDP local catastrophic error",
	{1, 1, 0x00}: "DDP tagged buffer error: invalid STag",
	{1, 1, 0x01}: "DDP tagged buffer error: base or bounds violation",
	{1, 1, 0x02}: "DDP tagged buffer error: STag not associated with DDP stream",
	{1, 1, 0x03}: "DDP tagged buffer error: TO wrap",
	{1, 1, 0x04}: "DDP tagged buffer error: invalid DDP version",
	{1, 2, 0x01}: "DDP untagged buffer error: invalid QN",
	{1, 2, 0x02}: "DDP untagged buffer error: invalid MSN, no buffer available",
	{1, 2, 0x03}: "DDP untagged buffer error: invalid MSN, MSN range is not valid",
	{1, 2, 0x04}: "DDP untagged buffer error: invalid MO",
	{1, 2, 0x05}: "DDP untagged buffer error: message too long for available buffer",
	{1, 2, 0x06}: "DDP untagged buffer error: invalid DDP version",
	{2, 0, 0x01}: "MPA: TCP connection closed, terminated or lost",
	{2, 0, 0x02}: "MPA: received CRC does not match",
	{2, 0, 0x03}: "MPA: marker and ULPDU_Length field mismatch",
	{2, 0, 0x04}: "MPA: invalid Request or Reply frame",
	{2, 0, 0x05}: "MPA: local catastrophic error",
	{2, 0, 0x06}: "MPA: insufficient IRD resources",
	{2, 0, 0x07}: "MPA: no matching RTR model",
}

// TestTerminateCodeNames checks that each classification the RFC tables
// define has a name, and that the name says what the table says.
func TestTerminateCodeNames(t *testing.T) {
	for c, want := range rfcTerminateTable {
		got := codeName(Layer(c.layer), c.etype, c.code)
		if strings.HasPrefix(got, "error type") {
			t.Errorf("%v: no name, want %q", c, want)
		}
	}
	// Spot checks of the pairs most easily confused.
	for c, want := range map[termClass]string{
		{0, 2, 0x06}: "remote operation error: unexpected opcode",
		{0, 2, 0x05}: "remote operation error: invalid RDMAP version",
		{1, 1, 0x00}: "tagged buffer: invalid STag",
		{1, 2, 0x03}: "untagged buffer: invalid MSN, MSN range is not valid",
		{2, 0, 0x02}: "received MPA CRC does not match the calculated value",
	} {
		if got := codeName(Layer(c.layer), c.etype, c.code); got != want {
			t.Errorf("%v is %q, want %q", c, got, want)
		}
	}
}

// faultSite is one place that builds a Terminate classification.
type faultSite struct {
	pos   string
	class termClass
}

// passThrough are the functions whose classification is a parameter or
// another value's: their callers are the fault paths, checked instead.
var passThrough = map[string]bool{
	"mpaErr": true, "ddpErr": true, "rdmapErr": true, // helpers: the call sites are checked
	"TerminateFor": true, "Ctrl": true, "Err": true, // copy a classification already made
}

// TestTerminateFaultPaths finds every place in iwarp and sdpcore (test
// files aside) that classifies a fault (an Error or TerminateCtrl literal,
// a call of mpaErr, ddpErr or rdmapErr) and checks that each of Layer,
// EType and Code is a named constant, never a number, and that the triple
// is one the RFC tables define.
func TestTerminateFaultPaths(t *testing.T) {
	fset := token.NewFileSet()
	files := parseDir(t, fset, ".")
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("libsdp/iwarp", fset, files, nil)
	if err != nil {
		t.Fatalf("type-checking iwarp: %v", err)
	}
	// Inside iwarp a classification is a constant's name; in sdpcore it is
	// iwarp.Name.
	named := func(pkgName string) func(ast.Expr) (uint8, bool) {
		return func(e ast.Expr) (uint8, bool) {
			var name string
			switch e := e.(type) {
			case *ast.Ident:
				if pkgName != "" {
					return 0, false
				}
				name = e.Name
			case *ast.SelectorExpr:
				if x, ok := e.X.(*ast.Ident); !ok || x.Name != pkgName {
					return 0, false
				}
				name = e.Sel.Name
			default:
				return 0, false
			}
			c, ok := pkg.Scope().Lookup(name).(*types.Const)
			if !ok {
				return 0, false
			}
			v, _ := constant.Uint64Val(c.Val())
			return uint8(v), true
		}
	}
	sites := collectSites(t, fset, files, named(""))
	n := len(sites)
	sites = append(sites, collectSites(t, fset, parseDir(t, fset, filepath.Join("..", "sdpcore")), named("iwarp"))...)
	if n < 20 || len(sites) == n {
		t.Fatalf("found %d fault paths in iwarp and %d in sdpcore: the search is broken", n, len(sites)-n)
	}
	for _, s := range sites {
		if _, ok := rfcTerminateTable[s.class]; !ok {
			t.Errorf("%s: Layer %d, EType %d, Code %#x is in no RFC table", s.pos, s.class.layer, s.class.etype, s.class.code)
		}
	}
}

func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var files []*ast.File
	for _, name := range names {
		// Test files aside, and files for another architecture
		// (crc_amd64.go or crc_other.go).
		if ok, err := build.Default.MatchFile(dir, filepath.Base(name)); strings.HasSuffix(name, "_test.go") || err != nil || !ok {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// collectSites walks files for classifications; value resolves a Layer,
// EType or Code expression to its constant value.
func collectSites(t *testing.T, fset *token.FileSet, files []*ast.File, value func(ast.Expr) (uint8, bool)) []faultSite {
	t.Helper()
	var sites []faultSite
	check := func(at ast.Node, layer, etype, code ast.Expr) {
		pos := fset.Position(at.Pos()).String()
		var v [3]uint8
		for i, e := range []ast.Expr{layer, etype, code} {
			if e == nil {
				t.Errorf("%s: a classification without all of Layer, EType and Code", pos)
				return
			}
			if hasNumber(e) {
				t.Errorf("%s: %s is a number; name it in terminate_codes.go", pos, exprString(fset, e))
				return
			}
			x, ok := value(e)
			if !ok {
				t.Errorf("%s: %s is not one of the named constants", pos, exprString(fset, e))
				return
			}
			v[i] = x
		}
		sites = append(sites, faultSite{pos, termClass{v[0], v[1], v[2]}})
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || passThrough[fd.Name.Name] {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if !isClassType(n.Type) {
						return true
					}
					fields := map[string]ast.Expr{}
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok {
								fields[k.Name] = kv.Value
							}
						}
					}
					typ := fields["Type"]
					if typ == nil {
						typ = fields["EType"]
					}
					if len(fields) == 0 {
						return true // Error{} or TerminateCtrl{}: a zero value to fill in, no classification
					}
					check(n, fields["Layer"], typ, fields["Code"])
				case *ast.CallExpr:
					id, ok := n.Fun.(*ast.Ident)
					if !ok {
						return true
					}
					switch id.Name {
					case "mpaErr":
						check(n, ast.NewIdent("LayerMPA"), ast.NewIdent("MPAErrType"), n.Args[0])
					case "ddpErr":
						check(n, ast.NewIdent("LayerDDP"), n.Args[0], n.Args[1])
					case "rdmapErr":
						check(n, ast.NewIdent("LayerRDMAP"), n.Args[0], n.Args[1])
					}
				}
				return true
			})
		}
	}
	return sites
}

func isClassType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Error" || e.Name == "TerminateCtrl"
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "iwarp" && (e.Sel.Name == "Error" || e.Sel.Name == "TerminateCtrl")
	}
	return false
}

func hasNumber(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if b, ok := n.(*ast.BasicLit); ok && b.Kind == token.INT {
			found = true
		}
		return !found
	})
	return found
}

func exprString(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	_ = printer.Fprint(&b, fset, e)
	return b.String()
}
