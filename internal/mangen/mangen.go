// Package mangen writes a man page (roff, man(7) macros) from a cobra
// command tree: the root's synopsis, description and options, then one
// section per subcommand, then extra sections the caller gives (exit
// status, files). It stands in for cobra/doc, whose go-md2man dependency
// this project does not take.
package mangen

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Section is an extra top-level section: a title and its paragraphs.
type Section struct {
	Title string
	Body  string // plain text; blank lines separate paragraphs
}

// Write writes root's man page in section 1.
func Write(w io.Writer, root *cobra.Command, date time.Time, extra []Section) error {
	p := &page{w: w}
	name := root.Name()
	p.line(`.TH %s 1 "%s" "%s" "User Commands"`, strings.ToUpper(name), date.Format("2006-01-02"), esc(name+" "+root.Version))
	p.section("NAME")
	p.text(name + ` \- ` + esc(root.Short))
	p.section("SYNOPSIS")
	p.line(".B %s", esc(root.Use))
	for _, c := range subcommands(root) {
		p.line(".br")
		p.line(".B %s %s", name, esc(c.Use))
	}
	p.section("DESCRIPTION")
	p.paragraphs(root.Long)
	p.section("OPTIONS")
	p.flags(root.NonInheritedFlags())
	p.line(".SS Options of every command")
	p.flags(root.PersistentFlags())
	p.section("COMMANDS")
	for _, c := range subcommands(root) {
		p.line(".SS %s", esc(name+" "+c.Use))
		p.paragraphs(c.Long)
		if c.Example != "" {
			p.line(".PP\nExamples:\n.PP\n.nf\n.RS")
			p.text(esc(strings.TrimRight(c.Example, "\n")))
			p.line(".RE\n.fi")
		}
		p.flags(c.LocalNonPersistentFlags())
	}
	for _, s := range extra {
		p.section(s.Title)
		p.paragraphs(s.Body)
	}
	return p.err
}

// subcommands are root's available subcommands, by name.
func subcommands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

type page struct {
	w   io.Writer
	err error
}

func (p *page) line(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", a...)
	}
}

func (p *page) text(s string) { p.line("%s", s) }

func (p *page) section(title string) { p.line(".SH %s", strings.ToUpper(title)) }

// paragraphs writes text: blank lines start paragraphs, and indented lines
// (a table, a list) keep their line breaks.
func (p *page) paragraphs(text string) {
	// Trim blank lines only: a table's first line keeps its indent.
	for _, para := range strings.Split(strings.Trim(text, "\n"), "\n\n") {
		p.line(".PP")
		if strings.HasPrefix(para, " ") || strings.Contains(para, "\n ") {
			p.line(".nf")
			p.text(esc(para))
			p.line(".fi")
			continue
		}
		p.text(esc(strings.ReplaceAll(para, "\n", " ")))
	}
}

func (p *page) flags(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		head := `\fB\-\-` + esc(f.Name) + `\fR`
		if f.Shorthand != "" {
			head = `\fB\-` + esc(f.Shorthand) + `\fR, ` + head
		}
		if f.Value.Type() != "bool" {
			head += " " + esc(strings.ToUpper(f.Value.Type()))
		}
		p.line(".TP\n%s", head)
		usage := f.Usage
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" && f.DefValue != "0s" {
			usage += " (default " + f.DefValue + ")"
		}
		p.text(esc(usage))
	})
}

// esc escapes text for roff: backslashes, and a line that would start with
// a control character.
func esc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
