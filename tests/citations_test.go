package tests

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Comments cite what a reader of the repository can open: an RFC and its section, a paper by
// its title, or a document in the repository. TestCitations keeps it so in the Go, C, assembly,
// shell and Makefile sources: it fails on a citation of something that is not in the tree (the
// design papers by a file number, design notes kept elsewhere, numbered findings or issues), on
// a Markdown document that does not exist, on a docs/PROTOCOL.md section that does not exist,
// and on a section of RFC 5040, 5041, 5044, 6580, 6581 or 7306 that the RFC does not have.

// sep is what may stand between two words of a citation that a comment wraps: spaces, a line
// break and the next line's comment marker.
const sep = `(?:\s|//|/?\*|#)+`

// unopenable are citations a reader of the repository cannot follow.
var unopenable = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`(?i)\bseeds?` + sep + `0\d\d\b`), "a paper by its file number: cite its title"},
	{regexp.MustCompile(`(?i)\bseed papers?\b|\bthe seed's\b|\bseeds'`), "the papers unnamed: cite them by title"},
	{regexp.MustCompile(`WIRE[.]md`), "a notes file outside the repository: state the fact and its RFC section"},
	{regexp.MustCompile(`\bDESIGN(?:[.]md)?` + sep + `decision\b`), "a numbered design decision kept outside the repository"},
	{regexp.MustCompile(`\.\./shared\b|\bshared/(?:wire|seeds)\b`), "a path outside the repository"},
	{regexp.MustCompile(`(?i)\bfindings?` + sep + `#?\d`), "a numbered finding kept outside the repository"},
	{regexp.MustCompile(`(?i)\bissue` + sep + `#\s*\d`), "an issue number: state what it says"},
}

// mdRef is a Markdown document named in a source file.
var mdRef = regexp.MustCompile(`[\w./-]*[A-Za-z]\.md\b`)

// protoSection is a section of docs/PROTOCOL.md cited by number.
var protoSection = regexp.MustCompile(`docs/PROTOCOL[.]md` + sep + `§(\d+)`)

// rfcCite is an RFC citation with its sections: "RFC 5044 §4.1-4.4", "RFC 5041 §7.1, §7.2",
// "RFC 6581 §9.1 and §9.2", "RFC 5044 Appendix A".
var rfcCite = regexp.MustCompile(`\bRFC` + sep + `(\d{3,5})((?:(?:` + sep + `|[,;]|and)*(?:§\s*[0-9A-Z](?:\.\d+)*(?:-\d+(?:\.\d+)*)?|Appendix\s+[A-Z](?:\.\d+)*\b))+)`)

// rfcSectionRef is one section of rfcCite's second group.
var rfcSectionRef = regexp.MustCompile(`(?:§\s*|Appendix\s+)([0-9A-Z](?:\.\d+)*)(?:-(\d+(?:\.\d+)*))?`)

// rfcSections are the section numbers of the RFCs the stack implements, from their tables of
// contents (appendices by letter).
var rfcSections = map[string]string{
	"5040": "1 1.1 1.2 1.3 2 2.1 2.2 2.3 2.4 3 3.1 3.2 4 4.1 4.2 4.3 4.4 4.5 4.6 4.7 4.8 5 5.1 5.2 5.2.1 5.2.2 5.3 5.4 5.5 6 6.1 6.2 6.2.1 7 7.1 7.2 8 8.1 8.1.1 8.1.2 8.2 8.2.1 8.2.2 9 10 10.1 10.2 A A.1 A.2 A.3 A.4 A.5 A.6 B C",
	"5041": "1 1.1 1.2 1.3 2 2.1 2.2 2.3 3 4 4.1 4.2 4.3 4.4 5 5.1 5.1.1 5.1.2 5.2 5.3 5.4 6 6.1 6.2 6.2.1 6.2.2 7 7.1 7.2 8 8.1 8.2 8.3 8.3.1 8.3.2 8.4 8.4.1 8.4.2 9 10 10.1 10.2 A B",
	"5044": "1 1.1 1.2 2 3 4 4.1 4.2 4.3 4.4 4.5 5 5.1 5.2 6 7 7.1 7.1.1 7.1.2 7.1.3 7.1.4 7.1.4.1 7.1.4.2 7.2 8 9 9.1 9.1.1 9.1.1.1 9.1.1.2 9.1.1.3 9.1.2 9.2 9.3 9.4 10 A A.1 A.2 A.3 A.4 A.5 A.5.1 A.5.2 B B.1 B.1.1 B.1.2 B.1.3 B.1.4 B.2 B.2.1 B.2.2 C C.1 C.2 C.2.1 C.2.2 C.2.3 C.2.4 C.2.5 C.3",
	"6580": "1 2 3 3.1 3.2 3.3 3.4 3.5 4 5 6",
	"6581": "1 1.1 1.2 2 3 4 4.1 4.2 4.3 4.4 4.4.1 4.4.2 4.4.3 5 6 7 8 9 9.1 9.2 9.3 10 11 12 13 14 14.1 14.2",
	"7306": "1 1.1 2 3 4 4.1 4.2 5 5.1 5.1.1 5.1.2 5.2 5.2.1 5.2.2 5.3 5.4 6 6.1 6.2 6.3 6.4 7 8 8.1 8.2 9 10 10.1 10.2 11 11.1 11.2 12 A A.1 A.2 A.3",
}

// citingSources are the files TestCitations reads: non-generated Go, C, assembly, shell
// (by extension or #! line) and Makefiles, outside build output and test data.
func citingSources(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			switch {
			case path == root:
			case name == "build" || name == "results" || name == "testdata" || name == "node_modules",
				strings.HasPrefix(name, ".") && name != ".ci":
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		switch filepath.Ext(name) {
		case ".go", ".c", ".h", ".s", ".sh":
			files = append(files, path)
			return nil
		}
		if name == "Makefile" || name == "GNUmakefile" || strings.HasSuffix(name, ".mk") {
			files = append(files, path)
			return nil
		}
		if filepath.Ext(name) == "" {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			line, _ := bufio.NewReader(f).ReadString('\n')
			if strings.HasPrefix(line, "#!") && strings.Contains(line, "sh") {
				files = append(files, path)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

func TestCitations(t *testing.T) {
	root := repoRoot(t)
	protocol, err := os.ReadFile(filepath.Join(root, "docs", "PROTOCOL.md"))
	require.NoError(t, err)
	files := citingSources(t, root)
	require.NotEmpty(t, files)

	var bad []string
	for _, path := range files {
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		if strings.HasSuffix(path, ".go") && generated.Match(src) {
			continue
		}
		rel, _ := filepath.Rel(root, path)
		at := func(off int) string { return rel + ":" + strconv.Itoa(1+bytes.Count(src[:off], []byte("\n"))) }
		text := string(src)

		for _, u := range unopenable {
			for _, m := range u.re.FindAllStringIndex(text, -1) {
				bad = append(bad, at(m[0])+": "+u.what+": "+strings.Join(strings.Fields(text[m[0]:m[1]]), " "))
			}
		}
		for _, m := range mdRef.FindAllStringIndex(text, -1) {
			if !mdExists(root, filepath.Dir(path), text[m[0]:m[1]]) {
				bad = append(bad, at(m[0])+": names "+text[m[0]:m[1]]+", which is not in the repository")
			}
		}
		for _, m := range protoSection.FindAllStringSubmatchIndex(text, -1) {
			n := text[m[2]:m[3]]
			if !regexp.MustCompile(`(?m)^## ` + n + `\. `).Match(protocol) {
				bad = append(bad, at(m[0])+": docs/PROTOCOL.md has no §"+n)
			}
		}
		for _, m := range rfcCite.FindAllStringSubmatchIndex(text, -1) {
			rfc := text[m[2]:m[3]]
			known, ok := rfcSections[rfc]
			if !ok {
				continue
			}
			valid := strings.Fields(known)
			for _, s := range rfcSectionRef.FindAllStringSubmatch(text[m[4]:m[5]], -1) {
				for _, sec := range s[1:] {
					if sec != "" && !slices.Contains(valid, sec) {
						bad = append(bad, at(m[0])+": RFC "+rfc+" has no section "+sec)
					}
				}
			}
		}
	}
	require.Empty(t, bad, "citations a reader of the repository cannot follow (cite an RFC section, a paper's title or a document in the repository)")
}

// mdExists reports whether a Markdown document named in a file of dir is in the repository:
// as written (relative to the repository or to dir), or, for a bare name, at the top or in docs/.
func mdExists(root, dir, name string) bool {
	cands := []string{filepath.Join(root, name), filepath.Join(dir, name)}
	if !strings.Contains(name, "/") {
		cands = append(cands, filepath.Join(root, "docs", name))
	}
	for _, c := range cands {
		if !strings.HasPrefix(c, root+string(filepath.Separator)) {
			continue
		}
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}
