package internal_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/pgoutbox/pgoutbox/"

// layers reads the table of docs/layout.md's "Import layers": package
// (without the module path) → layer.
func layers(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open("../docs/layout.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| (\\d+) \\| (.*) \\|$")
	pkg := regexp.MustCompile("`([a-z0-9/]+)`")
	out := map[string]int{}
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case line == "| layer | packages |":
			in = true
		case in && row.MatchString(line):
			m := row.FindStringSubmatch(line)
			n, _ := strconv.Atoi(m[1])
			for _, p := range pkg.FindAllStringSubmatch(m[2], -1) {
				out[p[1]] = n
			}
		case in && !strings.HasPrefix(line, "|"):
			in = false
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/layout.md: no import layer table")
	}
	return out
}

// imports lists the module's imports of every relay package (tests
// excluded), by go list.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../internal/...", "../pkg/relay/...", "../cmd/relay")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		p := strings.TrimPrefix(f[0], module)
		out[p] = nil
		for _, i := range f[1:] {
			if strings.HasPrefix(i, module) {
				out[p] = append(out[p], strings.TrimPrefix(i, module))
			}
		}
	}
	return out
}

// notRelay are the module's packages outside the relay's layers.
func notRelay(p string) bool {
	if p == "internal" { // this test
		return true
	}
	for _, pre := range []string{"internal/testenv", "internal/pgserver", "internal/inboxcli", "internal/decode/pgoutputtest"} {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// TestImportLayers fails when a package imports one of its own layer or a
// higher one (a lower stage importing a higher one), when a relay package
// is missing from the table, and when relaycli goes around pkg/relay to
// the engine.
func TestImportLayers(t *testing.T) {
	layer := layers(t)
	for p, imps := range imports(t) {
		lp, ok := layer[p]
		if !ok {
			if !notRelay(p) {
				t.Errorf("%s is in no layer of docs/layout.md's Import layers: add it", p)
			}
			continue
		}
		for _, i := range imps {
			li, ok := layer[i]
			switch {
			case !ok:
				continue // not a relay package (pkg/outbox, pkg/inbox, the test environment)
			case li >= lp:
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", p, lp, i, li)
			case p == "internal/relaycli" && li >= 3 && li <= 7:
				t.Errorf("relaycli imports %s (layer %d): it reaches the engine through pkg/relay only", i, li)
			}
		}
	}
}
