package cliutil

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/urfave/cli/v2"
)

// WithHelp sets cmd's Usage and Description from its help file in fsys,
// help/NAME.txt for a command NAME: the first line is the Usage, the text after
// the blank line under it the Description. The prose of a command's help
// lives in its file, beside the others, where it reads as text; the Go
// code keeps the flags and the action.
//
// A missing or malformed file panics: the files are embedded in the
// binary, so the package's tests meet it first.
func WithHelp(fsys fs.FS, cmd *cli.Command) *cli.Command {
	b, err := fs.ReadFile(fsys, "help/"+cmd.Name+".txt")
	if err != nil {
		panic(fmt.Sprintf("cliutil: help of %s: %v", cmd.Name, err))
	}
	usage, desc, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), "\n\n")
	if !ok || usage == "" || strings.Contains(usage, "\n") || desc == "" {
		panic(fmt.Sprintf("cliutil: help of %s: want a usage line, a blank line and a description", cmd.Name))
	}
	cmd.Usage, cmd.Description = usage, desc
	return cmd
}
