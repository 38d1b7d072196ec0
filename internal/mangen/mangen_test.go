// mangen_test.go owns the test of the man page writer: sections, flags,
// and roff's control characters escaped.
package mangen

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestWrite(t *testing.T) {
	root := &cobra.Command{Use: "tool [flags] -- CMD", Short: "does a thing", Long: "First para.\n\n.dot at start\n\n  an indented\n  table", Version: "v1"}
	root.Flags().StringP("label", "l", "", "a label")
	root.PersistentFlags().String("dir", "/x", `a \ dir`)
	sub := &cobra.Command{Use: "queue [--json]", Short: "q", Long: "Lists.", Example: "  tool queue", Run: func(*cobra.Command, []string) {}}
	sub.Flags().Bool("json", false, "as JSON")
	root.AddCommand(sub)
	var b bytes.Buffer
	if err := Write(&b, root, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), []Section{{"Exit status", "0 ok"}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`.TH TOOL 1 "2026-12-01" "tool v1" "User Commands"`, ".SH NAME\ntool \\- does a thing", ".B tool queue [\\-\\-json]",
		"\\&.dot at start", ".nf\n  an indented\n  table\n.fi", "\\fB\\-l\\fR, \\fB\\-\\-label\\fR STRING", "a \\e dir (default /x)",
		".SS tool queue [\\-\\-json]", "\\fB\\-\\-json\\fR\nas JSON", ".SH EXIT STATUS\n.PP\n0 ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("man page lacks %q:\n%s", want, out)
		}
	}
}
