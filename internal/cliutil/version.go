package cliutil

import (
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/pgoutbox/pgoutbox"
)

// releaseVersion is set by `make release VERSION=…` (-ldflags -X). It wins
// over the module version of the build information: since Go 1.24 a build
// in a git checkout stamps a pseudo-version (v0.0.0-2026…-abcdef+dirty)
// there, which must not hide the version the release was built as.
var releaseVersion string

// pseudoVersion matches the versions the go command makes up for a build
// without a tag: v0.0.0-20261201224549-460f8d17f3b4, with +dirty since Go
// 1.24.
var pseudoVersion = regexp.MustCompile(`\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// version describes the running binary: the release version stamped by
// `make release`, else the module version of its build information
// ("v0.1.0" when installed with go install …@v0.1.0), else, for a local
// build (a pseudo-version or "(devel)"), the source tree's VERSION file
// (pgoutbox.Version); then the VCS revision and whether the work
// tree had uncommitted changes (when built with VCS stamping), and the Go
// version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	return formatVersion(bi)
}

func formatVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	switch {
	case releaseVersion != "":
		v = releaseVersion
	case v == "" || v == "(devel)" || pseudoVersion.MatchString(v):
		v = pgoutbox.Version
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
