package relay_test

import (
	"os"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The relay.Config docs/configuration.md shows is the one
// ExampleConfig_WithDefaults runs, so a user who pastes it gets a
// configuration that validates.
func TestConfigurationDocShowsTheExampleConfig(t *testing.T) {
	shown := testenv.MarkdownBlock(t, "../../docs/configuration.md", "## Embedding the relay", "go")
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(src), "\nfunc ExampleConfig_WithDefaults() {\n")
	if !ok {
		t.Fatal("example_test.go has no ExampleConfig_WithDefaults")
	}
	if !strings.Contains(strings.ReplaceAll(example, "\n\t", "\n"), shown) {
		t.Errorf("docs/configuration.md's block is not in ExampleConfig_WithDefaults:\n%s", shown)
	}
}
