// version.go owns --version: the module version and VCS revision the
// binary was built from, as the Go toolchain recorded them (no -ldflags
// to forget).
package main

import (
	"runtime/debug"
	"strings"
)

// version describes the build: "v1.2.3 (rev 0123abcdef01, go1.26.8)", with
// "dirty" when the tree had changes; "(devel)" when built outside a module.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build info)"
	}
	return describeBuild(bi)
}

func describeBuild(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var extra []string
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if settings["vcs.modified"] == "true" {
			rev += " dirty"
		}
		extra = append(extra, "rev "+rev)
	}
	if t := settings["vcs.time"]; t != "" {
		extra = append(extra, t)
	}
	extra = append(extra, bi.GoVersion)
	return v + " (" + strings.Join(extra, ", ") + ")"
}
