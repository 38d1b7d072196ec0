// dirconf_test.go tests the settings file: parsed when root's (or the
// directory owner's) and written by nobody else, ignored with the reason
// otherwise, never followed or opened when it is not a regular file.
package dirconf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-hold/gpu-hold/internal/plant"
)

func write(t *testing.T, dir, text string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, File)
	if err := os.WriteFile(p, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadTrusted(t *testing.T) {
	for _, c := range []struct {
		text string
		want Retention
	}{
		{`{"records": {"keep": 500, "max_age": "30d"}}`, Retention{Keep: 500, MaxAge: Duration(30 * 24 * time.Hour)}},
		{`{"records": {"max_age": "36h"}}`, Retention{MaxAge: Duration(36 * time.Hour)}},
		{`{}`, Retention{}},
	} {
		dir := t.TempDir()
		write(t, dir, c.text, 0o644)
		s, err := Load(dir)
		if err != nil || s.Records != c.want {
			t.Errorf("Load of %s: %+v, %v; want %+v", c.text, s.Records, err, c.want)
		}
	}
	if s, err := Load(t.TempDir()); err != nil || s.Records.Set() {
		t.Errorf("Load of a dir without the file: %+v, %v; want nothing set, no error", s, err)
	}
}

func TestLoadBadText(t *testing.T) {
	for _, text := range []string{
		`{"records": {"keep": -1}}`,
		`{"records": {"max_age": "-1h"}}`,
		`{"records": {"max_age": "soon"}}`,
		`{"records": {"max_age": 3600}}`,
		`{"record": {"keep": 5}}`,
		`{"records": {"keep": 5}} {}`,
		`not json`,
	} {
		dir := t.TempDir()
		p := write(t, dir, text, 0o644)
		s, err := Load(dir)
		if s.Records.Set() {
			t.Errorf("Load of %s set %+v", text, s.Records)
		}
		plant.Says(t, err, "Load of "+text, p, "fix the file")
	}
}

// A file root does not vouch for sets nothing, and says why.
func TestLoadUntrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the files are chowned to another uid")
	}
	text := `{"records": {"keep": 1}}`
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, dir string)
		says  string
	}{
		{"another user's", func(t *testing.T, dir string) {
			os.Chown(write(t, dir, text, 0o644), 4343, 4343)
		}, "owned by uid 4343"},
		{"group-writable", func(t *testing.T, dir string) { write(t, dir, text, 0o664) }, "lets others write it"},
		{"symlink", func(t *testing.T, dir string) {
			real := write(t, t.TempDir(), text, 0o644)
			os.Symlink(real, filepath.Join(dir, File))
		}, "symlink"},
		{"FIFO", func(t *testing.T, dir string) { plant.FIFO(t, filepath.Join(dir, File)) }, "FIFO"},
		{"hard link", func(t *testing.T, dir string) {
			real := write(t, t.TempDir(), text, 0o644)
			os.Link(real, filepath.Join(dir, File))
		}, "2 links"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.plant(t, dir)
			var s Settings
			var err error
			plant.Within(t, "dirconf.Load", func() { s, err = Load(dir) })
			var ue *UntrustedError
			if !errors.As(err, &ue) {
				t.Fatalf("Load: %v, want an *UntrustedError", err)
			}
			if s.Records.Set() {
				t.Errorf("an untrusted file set %+v", s.Records)
			}
			plant.Says(t, err, "Load of "+c.name+" file", filepath.Join(dir, File), c.says, "chown root:")
		})
	}
}
