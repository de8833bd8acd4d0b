package e2e

import (
	"os"
	"strings"
	"testing"
)

// The consumer snippets of docs/sinks.md are the code of the inbox
// packages' examples, which compile with those packages' tests: every
// line of a snippet is a line of its example, but the elided error
// handling ("if err != nil { ... }") and "err = c.Run(ctx)", whose call
// the example makes with its own error check.
func TestSinksDocConsumerSnippetsAreExamples(t *testing.T) {
	for _, c := range []struct{ heading, example string }{
		{"## NATS JetStream", "../../pkg/inbox/inboxnats/example_test.go"},
		{"## RabbitMQ streams", "../../pkg/inbox/inboxrabbitmq/example_pgx_test.go"},
	} {
		blocks := docBlocks(t, "sinks.md", c.heading, "go")
		if len(blocks) == 0 {
			t.Fatalf("docs/sinks.md's %s has no Go block", c.heading)
		}
		snippet := blocks[len(blocks)-1]
		if !strings.Contains(snippet, ".New(&") {
			t.Fatalf("the last Go block of docs/sinks.md's %s is no consumer:\n%s", c.heading, snippet)
		}
		src, err := os.ReadFile(c.example)
		if err != nil {
			t.Fatal(err)
		}
		lines := map[string]bool{}
		for l := range strings.SplitSeq(string(src), "\n") {
			lines[strings.TrimSpace(l)] = true
		}
		for l := range strings.SplitSeq(snippet, "\n") {
			switch {
			case l == "" || l == "if err != nil { ... }":
			case l == "err = c.Run(ctx)":
				if !strings.Contains(string(src), "c.Run(ctx)") {
					t.Errorf("%s does not run c.Run(ctx), which docs/sinks.md's %s shows", c.example, c.heading)
				}
			case !lines[l]:
				t.Errorf("docs/sinks.md's %s shows %q, which %s does not have: keep the two the same", c.heading, l, c.example)
			}
		}
	}
}
