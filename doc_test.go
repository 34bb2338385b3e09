package lock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryExportedNameIsDocumented: every package of the module's public
// API has a package comment, and every exported name in it a doc comment
// (or, for a field, an interface method, or a name in a documented group
// of constants or variables, a comment on its line or its group): types,
// functions, methods of exported types, constants, variables, fields of
// exported struct types and methods of exported interfaces. internal/ is
// not importable from outside the module and cmd/ holds commands, so
// neither is public API; bench/ is a module of its own.
func TestEveryExportedNameIsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	documented := make(map[string]bool) // package directory → has a package comment
	var missing []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "." && (path == "bench" || path == "internal" || path == "cmd" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		documented[dir] = documented[dir] || f.Doc != nil
		missing = append(missing, undocumented(fset, f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, ok := range documented {
		if !ok {
			missing = append(missing, dir+": package comment")
		}
	}
	for _, m := range missing {
		t.Errorf("%s: no doc comment, want one", m)
	}
}

// undocumented lists the exported names of f that have no doc comment, as
// "file:line: name".
func undocumented(fset *token.FileSet, f *ast.File) []string {
	var missing []string
	report := func(pos token.Pos, name string) {
		missing = append(missing, fset.Position(pos).String()+": "+name)
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil {
				recv := receiverType(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue
				}
				name = recv + "." + name
			}
			if d.Name.IsExported() && d.Doc == nil {
				report(d.Pos(), name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if s.Doc == nil && d.Doc == nil {
						report(s.Pos(), s.Name.Name)
					}
					missing = append(missing, undocumentedMembers(fset, s)...)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
							report(n.Pos(), n.Name)
						}
					}
				}
			}
		}
	}
	return missing
}

// undocumentedMembers lists the exported fields of a struct type, or the
// methods of an interface type, that have neither a doc comment nor a
// comment on their line.
func undocumentedMembers(fset *token.FileSet, s *ast.TypeSpec) []string {
	var fields *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return nil
	}
	var missing []string
	for _, field := range fields.List {
		for _, n := range field.Names { // none for an embedded field
			if n.IsExported() && field.Doc == nil && field.Comment == nil {
				missing = append(missing, fset.Position(n.Pos()).String()+": "+s.Name.Name+"."+n.Name)
			}
		}
	}
	return missing
}

// receiverType returns the name of a method's receiver type, T for T, *T
// and T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
