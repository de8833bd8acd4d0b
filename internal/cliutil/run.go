package cliutil

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// Program is one command-line binary built on urfave/cli.
type Program struct {
	// App is the urfave/cli application. Run sets its error handlers and
	// hides the stock help command (a package variable urfave/cli writes
	// to, which concurrent runs in one test process would race on).
	App *cli.App
	// Code maps the error of a command to an exit code. Defaults to
	// ExitUsage for a UsageError and ExitFailure for any other error.
	Code func(error) int
	// Clean rewrites the error line before it is printed, for example to
	// remove a password. Optional.
	Clean func(string) string
}

// Run runs the program with args (without the program name) and returns
// the exit code, printing a failure as one line on the App's ErrWriter.
func (p *Program) Run(ctx context.Context, args []string) int {
	app := p.App
	prepare(app)
	code := p.Code
	if code == nil {
		code = exitCode
	}
	args, done, err := arrange(app, args)
	if err == nil && done {
		return ExitOK
	}
	if err == nil {
		err = app.RunContext(ctx, append([]string{app.Name}, args...))
	}
	if err == nil {
		return ExitOK
	}
	line := err.Error()
	if p.Clean != nil {
		line = p.Clean(line)
	}
	fmt.Fprintf(app.ErrWriter, "%s: %s\n", app.Name, Line(app.Name, line))
	return code(err)
}

func prepare(app *cli.App) {
	usage := func(_ *cli.Context, err error, _ bool) error { return UsageError{err} }
	app.HideHelpCommand = true
	app.HideVersion = true
	// arrange answers --version before urfave/cli parses; the flag is
	// declared only so that --help lists it.
	if !hasFlag(app.Flags, "version") {
		app.Flags = append(app.Flags, &cli.BoolFlag{Name: "version", Usage: "print the version (release, VCS revision, Go version) and exit"})
	}
	app.OnUsageError = usage
	app.ExitErrHandler = func(*cli.Context, error) {} // Run prints and maps errors
	if app.Action == nil {
		app.Action = func(c *cli.Context) error {
			_ = cli.ShowAppHelp(c)
			return Usagef("a command is required (%s)", strings.Join(commandNames(app), ", "))
		}
	}
	for _, cmd := range app.Commands {
		cmd.OnUsageError = usage
		cmd.HideHelpCommand = true
	}
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

func commandNames(app *cli.App) []string {
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return names
}

// arrange rewrites args into the order urfave/cli parses: the command
// first, then every flag (those given before the command too), then the
// positional arguments. It answers --version and `help [CMD]`. done means
// nothing is left to run.
func arrange(app *cli.App, args []string) (out []string, done bool, err error) {
	values := map[string]bool{} // flag name -> takes a value, over every command
	for _, cmd := range app.Commands {
		for n, v := range flagArity(cmd.Flags) {
			values[n] = v
		}
	}
	for n, v := range flagArity(app.Flags) {
		values[n] = v
	}
	lead, rest := splitFlags(args, values, true)
	for _, a := range lead {
		if a == "--version" || a == "-version" {
			fmt.Fprintf(app.Writer, "%s %s\n", app.Name, version())
			return nil, true, nil
		}
	}
	if len(rest) == 0 {
		return lead, false, nil
	}
	name := rest[0]
	if name == "help" {
		if len(rest) == 1 {
			return []string{"--help"}, false, nil
		}
		name, rest = rest[1], []string{rest[1], "--help"}
	}
	cmd := app.Command(name)
	if cmd == nil {
		return nil, false, Usagef("unknown command %q (commands: %s; see %s --help)", name, strings.Join(commandNames(app), ", "), app.Name)
	}
	flags, pos := splitFlags(rest[1:], flagArity(cmd.Flags), false)
	out = append([]string{cmd.Name}, lead...)
	out = append(out, flags...)
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	return out, false, nil
}

// flagArity maps every name of flags to whether it takes a value.
func flagArity(flags []cli.Flag) map[string]bool {
	m := map[string]bool{"help": false, "h": false}
	for _, f := range flags {
		takes := true
		if df, ok := f.(cli.DocGenerationFlag); ok {
			takes = df.TakesValue()
		}
		if _, ok := f.(*cli.BoolFlag); ok {
			takes = false
		}
		for _, n := range f.Names() {
			m[n] = takes
		}
	}
	return m
}

// splitFlags separates flag tokens (with their values) from positional
// ones. With leading, it stops at the first positional token (the command).
// Everything after "--" is positional.
func splitFlags(args []string, values map[string]bool, leading bool) (flags, pos []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(pos, args[i+1:]...)
		case len(a) < 2 || a[0] != '-':
			if leading {
				return flags, args[i:]
			}
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if values[name] && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, pos
}

var (
	goTypeName = regexp.MustCompile(`\b[a-zA-Z0-9_]+\.\(\*?[A-Za-z0-9_]+\)\.[A-Za-z0-9_]+: `)
	undefined  = regexp.MustCompile(`flag provided but not defined: -+(\S+)`)
	badValue   = regexp.MustCompile(`invalid value ("[^"]*") for flag -+(\S+): `)
	envValue   = regexp.MustCompile(`could not parse ("[^"]*") from environment variable "(\S+)" as value for flag (\S+): `)
)

// Line turns an error message into one line for stderr: whitespace runs
// (pgconn puts every address it tried on a line of its own) become one
// space, Go type names ("kafka.(*Client).Metadata: ") and inner repeats of
// the "name: " prefix are dropped, and the flag package's wording names
// flags as the user types them.
func Line(name, msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	msg = goTypeName.ReplaceAllString(msg, "")
	msg = undefined.ReplaceAllString(msg, "unknown flag --$1")
	msg = badValue.ReplaceAllString(msg, "--$2 $1: ")
	msg = envValue.ReplaceAllString(msg, "--$3 ($2) $1: ")
	prefix := regexp.MustCompile(`(^|[\s(])` + regexp.QuoteMeta(name) + `: `)
	return prefix.ReplaceAllString(msg, "$1")
}

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
