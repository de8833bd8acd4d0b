package cliutil

import (
	"runtime/debug"
	"strings"
)

// releaseVersion is set by `make release` (-ldflags -X) to git describe's
// answer, shown when the build information has no module version.
var releaseVersion string

// Version describes the running binary from its build information: the
// module version ("v0.1.0" when installed with go install …@v0.1.0,
// "(devel)" for a local build), the VCS revision and whether the work tree
// had uncommitted changes (when built with VCS stamping), and the Go version.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	return formatVersion(bi)
}

func formatVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if (v == "" || v == "(devel)") && releaseVersion != "" {
		v = releaseVersion
	}
	if v == "" {
		v = "(devel)"
	}
	var rev, modified, at string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			at = s.Value
		}
	}
	parts := []string{}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		r := "revision " + rev
		if modified == "true" {
			r += " (dirty)"
		}
		if at != "" {
			r += " of " + at
		}
		parts = append(parts, r)
	}
	parts = append(parts, bi.GoVersion)
	return v + " (" + strings.Join(parts, ", ") + ")"
}
