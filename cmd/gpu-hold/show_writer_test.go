// show_writer_test.go owns the tests of whose record gpu-hold show says it
// is: the file's owner, in every format, with a warning when that owner is
// not the holder the record names.
package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/proc"
)

func TestShowSaysWhoseRecord(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the record is chowned to another uid")
	}
	self, _ := proc.Self()
	genuine := openRecord(t, self) // names uid 0, root's file
	planted := openRecord(t, self)
	if err := os.Chown(planted, 4343, 4343); err != nil {
		t.Fatal(err)
	}
	who := "uid 4343"
	if n := knownUserName(4343); n != "" {
		who += " (" + n + ")"
	}
	warn := "record written by " + who + ", not by the holder it names, uid 0 (root): its content is that user's claim"
	for _, c := range []struct {
		name, path string
		notHolder  bool
	}{{"genuine", genuine, false}, {"planted", planted, true}} {
		t.Run(c.name, func(t *testing.T) {
			code, tree, stderr, _ := cli(t, "show", "--color=never", c.path)
			if code != 0 {
				t.Fatalf("show: exit %d\n%s", code, stderr)
			}
			first, _, _ := strings.Cut(tree, "\n")
			if c.notHolder != (first == "warning: "+warn) {
				t.Errorf("tree's first line %q; want the warning: %v", first, c.notHolder)
			}
			if !c.notHolder && (strings.Contains(tree, "warning") || !strings.Contains(tree, "file: written by uid 0 (root), the holder it names")) {
				t.Errorf("tree of a genuine record:\n%s", tree)
			}
			_, doc, _, _ := cli(t, "show", "--format=json", c.path)
			var d struct {
				Writer struct {
					UID       int
					NotHolder bool `json:"not_holder"`
					Warning   string
				}
			}
			if err := json.Unmarshal([]byte(doc), &d); err != nil || d.Writer.NotHolder != c.notHolder || (c.notHolder && d.Writer.Warning != warn) {
				t.Errorf("json writer %+v (%v), want not_holder %v", d.Writer, err, c.notHolder)
			}
			_, trace, _, _ := cli(t, "show", "--format=timeline", c.path)
			var tr struct{ OtherData map[string]any }
			if err := json.Unmarshal([]byte(trace), &tr); err != nil || tr.OtherData["record_not_holder"] != c.notHolder {
				t.Errorf("timeline otherData %v (%v), want record_not_holder %v", tr.OtherData, err, c.notHolder)
			}
		})
	}
}
