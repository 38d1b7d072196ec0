// man.go owns the hidden `gpu-hold man` command: the man page, written from
// the command tree (internal/mangen) with the exit codes and files, so it
// cannot drift from --help. `make man` runs it.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-hold/gpu-hold/internal/mangen"
	"github.com/gpu-hold/gpu-hold/internal/record"
)

func newCmdMan(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "man",
		Short:  "Write the man page (roff) to standard output",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return manRun(cmd.OutOrStdout(), root)
		},
	}
}

func manRun(out io.Writer, root *cobra.Command) error {
	// SOURCE_DATE_EPOCH makes the page reproducible (Debian's builds set it).
	date := time.Now()
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		date = time.Unix(s, 0).UTC()
	}
	if err := mangen.Write(out, root, date, manSections()); err != nil {
		return usageErr("writing the man page: %v", err)
	}
	return nil
}

func manSections() []mangen.Section {
	codes := exitStatusText()
	return []mangen.Section{
		{Title: "Exit status", Body: codes},
		{Title: "Environment", Body: `  GPU_HOLD_DIR            the queue directory (as --dir)
  GPU_HOLD_MEM_ABORT_GIB  the default --mem-floor, in GiB
  GPU_HOLD_DEBUG          debug logging
  GITHUB_ACTIONS=true     errors and warnings also as ::error:: and ::warning:: annotations
  NO_COLOR                no colour in gpu-hold show

The payload gets GPU_HOLD_ID, GPU_HOLD_RESOURCE and GPU_HOLD_LABEL.`},
		{Title: "Files", Body: `  /var/lib/gpu-hold/               the fleet queue directory (group gpu-hold)
  /var/lib/gpu-hold/RES/records/   the records of resource RES's holds
  /var/lib/gpu-hold/resources.json the resources and their devices
  /var/lib/gpu-hold/settings.json  the admin's settings for the whole directory: the records'
                                   retention, {"records": {"keep": 500, "max_age": "30d"}},
                                   applied to every user's records by root (its holds, and
                                   gpu-hold reap); root's or the directory owner's, mode 644`},
	}
}

// exitStatusText is the man page's EXIT STATUS, made from the table of
// outcomes.
func exitStatusText() string {
	var b strings.Builder
	for i, o := range record.Outcomes {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "  %-5s %s (%s)", codeText(o.Code), o.Meaning, o.Cause)
	}
	return b.String()
}

// codeText shows an outcome's code as the table's reader knows it.
func codeText(code int) string {
	switch code {
	case record.CodePayload:
		return "N"
	case record.CodeSignal:
		return "128+S"
	}
	return strconv.Itoa(code)
}
