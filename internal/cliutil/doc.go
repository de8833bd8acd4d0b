// Package cliutil is the command-line convention shared by the relay and
// inbox binaries, so both behave the same:
//
//   - flags are accepted before the command (compatibility) and after it, and
//     after positional arguments; each command's --help lists every flag it
//     takes;
//   - `help CMD` is `CMD --help`; an unknown command lists the valid ones;
//   - --version prints the module version, VCS revision, dirty flag and Go
//     version from the binary's build information;
//   - exit code 0 on success, 1 on a runtime failure, 2 on bad usage, with
//     exactly one line on stderr, "NAME: cause", printed once, without Go
//     type names or doubled prefixes;
//   - sizes accept 64MiB, 64MB or a number of bytes; durations say the form
//     they expect.
package cliutil
