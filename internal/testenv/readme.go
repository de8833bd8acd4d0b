package testenv

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// MarkdownFrom returns the Markdown file path from the first heading on
// (the whole file when heading is empty); the test fails when there is no
// heading.
func MarkdownFrom(t testing.TB, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, heading)
	if i < 0 {
		t.Fatalf("%s has no %q", path, heading)
	}
	return s[i:]
}

// MarkdownBlock returns the body of the first fenced block of kind (sh,
// sql, go; "" for a plain fence) after heading (from the start when
// heading is empty) in the Markdown file path: what a reader copies.
func MarkdownBlock(t testing.TB, path, heading, kind string) string {
	t.Helper()
	s := MarkdownFrom(t, path, heading)
	fence := "```" + kind + "\n"
	start := strings.Index(s, fence)
	if start < 0 {
		t.Fatalf("%s: no %s block after %q", path, kind, heading)
	}
	s = s[start+len(fence):]
	return s[:strings.Index(s, "```")]
}

// ShBlock returns the command lines of the first sh block after heading
// (from the start when heading is empty) in the Markdown file path,
// trimmed, with comments ("  # …" and whole-line ones) dropped and
// "$NAME" and $NAME replaced from vars: the lines a reader pastes, for a
// test that runs them as written.
func ShBlock(t testing.TB, path, heading string, vars map[string]string) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(MarkdownBlock(t, path, heading, "sh"), "\n") {
		if i := strings.Index(l, "  #"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for k, v := range vars {
			l = strings.ReplaceAll(strings.ReplaceAll(l, `"$`+k+`"`, v), "$"+k, v)
		}
		lines = append(lines, l)
	}
	return lines
}

// RunMain runs a command's run function (a main package's
// run(ctx, args, stdout, stderr) exit code) in the background until t ends,
// and returns the first submatch of addr in its stdout once it prints one
// (the address it listens on), with its stderr for failure messages.
func RunMain(t testing.TB, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int, args []string, addr *regexp.Regexp) (string, *SyncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr SyncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	t.Cleanup(func() { cancel(); <-done })
	var found string
	WaitFor(t, time.Minute, "the command listening ("+addr.String()+")", func() (bool, error) {
		select {
		case code := <-done:
			t.Fatalf("exited %d before listening:\n%s", code, stderr.String())
		default:
		}
		if m := addr.FindStringSubmatch(stdout.String()); m != nil {
			found = m[1]
		}
		return found != "", nil
	})
	return found, &stderr
}
