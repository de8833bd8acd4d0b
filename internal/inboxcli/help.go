package inboxcli

import "embed"

// helpFiles hold each command's usage line and description, help/NAME.txt
// (see cliutil.WithHelp).
//
//go:embed help/*.txt
var helpFiles embed.FS
