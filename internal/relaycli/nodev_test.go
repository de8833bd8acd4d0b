package relaycli_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A build with -tags nodev leaves the demo out: no `relay dev`, and neither
// the embedded Kafka broker, the Postgres launcher nor the inbox in the
// binary.
func TestNodevBuildCarriesNoDemo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tags string
		want bool
	}{{"", true}, {"nodev", false}} {
		out, err := exec.Command("go", "list", "-deps", "-tags", tc.tags, "github.com/pgoutbox/pgoutbox/cmd/relay").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %q: %v\n%s", tc.tags, err, out)
		}
		for _, pkg := range []string{"github.com/twmb/franz-go/pkg/kfake", "github.com/pgoutbox/pgoutbox/internal/pgserver",
			"github.com/pgoutbox/pgoutbox/pkg/inbox", "github.com/pgoutbox/pgoutbox/internal/devdemo"} {
			if got := strings.Contains(string(out)+"\n", pkg+"\n"); got != tc.want {
				t.Errorf("cmd/relay with -tags %q depends on %s: %v, want %v", tc.tags, pkg, got, tc.want)
			}
		}
	}
}
