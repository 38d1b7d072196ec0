// layers_test.go owns the check of the import rule against the code: every
// import of every Go file in the module, tests included.
package layers

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// root is the module's directory, two levels above this package.
const root = "../.."

// TestImportsRunDown fails on any import that breaks the rule in layers.go.
func TestImportsRunDown(t *testing.T) {
	n := 0
	walkGo(t, func(pkg, file string, imports []string) {
		inTest := strings.HasSuffix(file, "_test.go")
		for _, imp := range imports {
			to, ok := strings.CutPrefix(imp, Module+"/")
			if !ok {
				continue
			}
			n++
			if ok, why := Allowed(pkg, to, inTest); !ok {
				t.Errorf("%s imports %s: %s (the rule: internal/layers/layers.go)", file, imp, why)
			}
		}
	})
	if n == 0 {
		t.Fatal("no import of the module's own packages was read: the walk found nothing")
	}
}

// TestEveryPackageHasAFloor fails when a package is added without its place
// in the rule, even before anything imports it.
func TestEveryPackageHasAFloor(t *testing.T) {
	seen := map[string]bool{}
	walkGo(t, func(pkg, file string, _ []string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		if _, ok := Floors[pkg]; !ok && !TestOnly[pkg] && !Tools[pkg] {
			t.Errorf("package %s (%s) has no floor in internal/layers/layers.go: give it one", pkg, file)
		}
	})
}

// TestRuleRefusesWrongImports keeps the rule itself honest: imports that
// would break the architecture are refused.
func TestRuleRefusesWrongImports(t *testing.T) {
	for _, c := range []struct {
		from, to string
		inTest   bool
	}{
		{"queue", "tracker", false},                     // the queue knows nothing of lineages
		{"queue", "internal/record", false},             // same floor
		{"internal/teardown", "hold", false},            // nothing but cmd imports hold
		{"internal/guard", "hold", false},               // likewise
		{"internal/proc", "queue", false},               // a leaf imports nothing of ours
		{"tracker", "internal/teardown", false},         // up
		{"hold", "internal/plant", false},               // test-only code in the product
		{"test", "hold", true},                          // the integration tests use the binary
		{"internal/device", "internal/newthing", false}, // a package with no floor
	} {
		if ok, _ := Allowed(c.from, c.to, c.inTest); ok {
			t.Errorf("%s -> %s allowed; the rule must refuse it", c.from, c.to)
		}
	}
	for _, c := range [][2]string{{"hold", "queue"}, {"internal/teardown", "internal/proc"}, {"cmd/gpu-hold", "hold"}} {
		if ok, why := Allowed(c[0], c[1], false); !ok {
			t.Errorf("%s -> %s refused (%s); the rule must allow it", c[0], c[1], why)
		}
	}
}

// walkGo calls f for every Go file of the module (not of nested modules),
// with its package's path relative to the module and its imports.
func walkGo(t *testing.T, f func(pkg, file string, imports []string)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipDir(path, d.Name())
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		af, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		var imps []string
		for _, s := range af.Imports {
			p, _ := strconv.Unquote(s.Path.Value)
			imps = append(imps, p)
		}
		f(filepath.ToSlash(rel), path, imps)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// skipDir skips hidden directories, testdata and nested modules.
func skipDir(path, name string) error {
	if path == root {
		return nil
	}
	if strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" {
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
		return filepath.SkipDir
	}
	return nil
}
