package conformance

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"testing"
)

// TestRunListsTheProperties: Run's doc comment, where a third party learns
// the names that Harness.Skip takes, lists every property of the suite, in
// the order Run runs them, each with the Harness field it needs.
func TestRunListsTheProperties(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "conformance.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "Run" {
			doc = fd.Doc.Text()
		}
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^  - (\w+(?: \(\w+\))?):`).FindAllStringSubmatch(doc, -1) {
		got = append(got, m[1])
	}
	var want []string
	for _, p := range properties {
		item := p.name
		if p.needs != "" {
			item += " (" + p.needs + ")"
		}
		want = append(want, item)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the properties listed in Run's doc comment:\n\t%q\nwant, in the order of the properties table:\n\t%q", got, want)
	}
}
