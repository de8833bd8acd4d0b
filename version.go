package pgoutbox

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version is the version of this source tree, from the VERSION file: the
// last release ("v0.1.0") until the next one changes it, together with
// CHANGELOG.md's newest dated section, the Helm chart's appVersion and
// docs/kubernetes.md's image tag. `relay --version` prints it when the
// build carries no better one (no tag, no `make release` stamp, no
// go install …@version).
var Version = strings.TrimSpace(versionFile)
