package cliutil

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/urfave/cli/v2"
)

// WithHelp splits a help file into the Usage line and the Description,
// and refuses a file that is missing or lacks either.
func TestWithHelp(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"help/do.txt":      {Data: []byte("do it\n\nDo does it.\n\nTwice if asked.\n")},
		"help/bare.txt":    {Data: []byte("just a usage line\n")},
		"help/twoline.txt": {Data: []byte("usage\nand more\n\ndescription\n")},
	}
	cmd := WithHelp(fsys, &cli.Command{Name: "do", ArgsUsage: "ID"})
	if cmd.Usage != "do it" || cmd.Description != "Do does it.\n\nTwice if asked." || cmd.ArgsUsage != "ID" {
		t.Errorf("Usage %q, Description %q, ArgsUsage %q", cmd.Usage, cmd.Description, cmd.ArgsUsage)
	}
	for _, name := range []string{"missing", "bare", "twoline"} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "help of "+name) {
					t.Errorf("%s: panic %v, want one naming the command", name, r)
				}
			}()
			WithHelp(fsys, &cli.Command{Name: name})
		}()
	}
}
