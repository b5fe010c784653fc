package mitm

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/capsem/capsem/netstack"
)

// readmeReasons is the README's table of event reasons: the first cell of
// each row under "### What the guest sees", one reason per row.
func readmeReasons(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\|")
	var out []string
	in, rows := false, 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case line == "### What the guest sees":
			in = true
		case !in:
		case strings.HasPrefix(line, "#"):
			in = false
		case strings.HasPrefix(line, "|"):
			rows++
			if rows <= 2 { // the header and the separator
				continue
			}
			m := row.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("README: a row of the reasons table whose first cell is not one `reason`: %s", line)
				continue
			}
			out = append(out, m[1])
		}
	}
	if len(out) == 0 {
		t.Fatal("README: no table of event reasons under \"### What the guest sees\"")
	}
	return out
}

// TestREADMEListsEveryReason: the README's table of event reasons is the
// reasons netstack and the MITM record, each once, no more and no fewer.
func TestREADMEListsEveryReason(t *testing.T) {
	code := map[string]bool{}
	for _, r := range append(netstack.Reasons(), Reasons()...) {
		code[r] = true
	}
	seen := map[string]bool{}
	for _, r := range readmeReasons(t) {
		if seen[r] {
			t.Errorf("README: %q has two rows", r)
		}
		seen[r] = true
		if !code[r] {
			t.Errorf("README: %q is not a reason netstack or the MITM records (netstack.Reasons, mitm.Reasons)", r)
		}
	}
	for r := range code {
		if !seen[r] {
			t.Errorf("README: the table of event reasons has no row for %q", r)
		}
	}
}

// TestReasonsListEveryConstant: each package's Reasons lists every Reason
// constant of its reasons.go, so that a new reason cannot miss the README
// check above.
func TestReasonsListEveryConstant(t *testing.T) {
	for _, file := range []string{"reasons.go", "../netstack/reasons.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var consts, listed []string
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				if d.Tok != token.CONST {
					continue
				}
				for _, s := range d.Specs {
					for _, n := range s.(*ast.ValueSpec).Names {
						if strings.HasPrefix(n.Name, "Reason") {
							consts = append(consts, n.Name)
						}
					}
				}
			case *ast.FuncDecl:
				if d.Name.Name != "Reasons" {
					continue
				}
				ast.Inspect(d.Body, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok {
						listed = append(listed, id.Name)
					}
					return true
				})
			}
		}
		if len(consts) == 0 {
			t.Fatalf("%s: no Reason constants", file)
		}
		for _, c := range consts {
			if !slices.Contains(listed, c) {
				t.Errorf("%s: %s is not in Reasons", file, c)
			}
		}
	}
}
