// funclen_test.go owns the other half of the structure's rule: no product
// function is longer than one screen, so each reads at once (a long
// sequence becomes a table of contents over named phases).
package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a product function may be.
const maxFuncLines = 80

// TestNoLongFunctions fails on a product function over maxFuncLines:
// tests, generated files and the bench (a tool) are not product code.
func TestNoLongFunctions(t *testing.T) {
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(root, path); Tools[filepath.ToSlash(rel)] || TestOnly[filepath.ToSlash(rel)] {
				return filepath.SkipDir
			}
			return skipDir(path, d.Name())
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "_bpfel") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n++
			if lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; lines > maxFuncLines {
				t.Errorf("%s: %s is %d lines, over %d: make it a table of contents over named phases", path, fd.Name.Name, lines, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no product function was read: the walk found nothing")
	}
}
