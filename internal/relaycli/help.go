package relaycli

import (
	"flag"

	"github.com/urfave/cli/v2"
)

// helpFlag is urfave/cli's --help/-h without its one flaw here: the stock
// cli.HelpFlag is a package-level *BoolFlag whose Apply writes into itself,
// so two CLIs running at once in one process (tests) race on it.
type helpFlag struct{ *cli.BoolFlag }

// Apply registers the flag on set without touching the shared value.
func (f helpFlag) Apply(set *flag.FlagSet) error {
	for _, name := range f.Names() {
		set.Bool(name, false, f.Usage)
	}
	return nil
}

func init() {
	cli.HelpFlag = helpFlag{&cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help"}}
}
