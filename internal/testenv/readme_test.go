package testenv_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// MarkdownBlock returns the body of the first block of a kind after a
// heading; ShBlock its command lines as a reader pastes them.
func TestMarkdownBlock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "doc.md")
	doc := "# Doc\n\n```sh\nearly\n```\n\n## Run\n\n```go\npackage main\n```\n\n" +
		"```sh\n# setup\nrelay setup --slot \"$SLOT\"   # once\n\nrelay run --slot $SLOT\n```\n\n## Plain\n\n```\nplain\n```\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ heading, kind, want string }{
		{"", "sh", "early\n"},
		{"## Run", "go", "package main\n"},
		{"## Plain", "", "plain\n"},
	} {
		if got := testenv.MarkdownBlock(t, path, c.heading, c.kind); got != c.want {
			t.Errorf("MarkdownBlock(%q, %q) = %q, want %q", c.heading, c.kind, got, c.want)
		}
	}
	got := testenv.ShBlock(t, path, "## Run", map[string]string{"SLOT": "s1"})
	if want := []string{"relay setup --slot s1", "relay run --slot s1"}; !slices.Equal(got, want) {
		t.Errorf("ShBlock = %q, want %q", got, want)
	}
}
