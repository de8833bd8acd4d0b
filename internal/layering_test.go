package internal_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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
	row := regexp.MustCompile(`^\| (\d+) \| (.*) \|$`)
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
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../internal/...", "../pkg/relay/...", "../pkg/kafkasasl/...", "../cmd/relay")
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

// throughRelay are the command line's packages, which reach the engine
// through pkg/relay only.
var throughRelay = map[string]bool{
	"internal/relaycli": true, "internal/fleet": true, "internal/report": true, "internal/preflight": true,
	"internal/otlptracing": true, "internal/memlimit": true, "internal/stopsignal": true,
}

// TestImportLayers fails when a package imports one of its own layer or a
// higher one (a lower stage importing a higher one), when a relay package
// is missing from the table, and when a package of the command line
// (relaycli, the fleet, and what relaycli calls apart from its flags)
// goes around pkg/relay to the engine.
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
			case throughRelay[p] && li >= 3 && li <= 7:
				t.Errorf("%s imports %s (layer %d): it reaches the engine through pkg/relay only", p, i, li)
			}
		}
	}
}

// TestInboxLinksNoRelayEngine fails when what an inbox consumer imports
// (pkg/inbox and its loops, tests left out) links a relay package
// above layer 1 (the shared leaves: the message contract, names, drivers,
// migrations), the replication client or the AWS SDK: a consumer links
// only what it calls. AWS_MSK_IAM is the consumer's own import of
// pkg/kafkasasl/awsmsk.
func TestInboxLinksNoRelayEngine(t *testing.T) {
	layer := layers(t)
	cmd := exec.Command("go", "list", "-deps", "../pkg/inbox", "../pkg/inbox/inboxkafka", "../pkg/inbox/inboxkafkago",
		"../pkg/inbox/inboxnats", "../pkg/inbox/inboxrabbitmq")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(b)) {
		p := strings.TrimPrefix(dep, module)
		switch {
		case strings.Contains(dep, "jackc/pglogrepl"), strings.Contains(dep, "aws-sdk-go"), p == "pkg/kafkasasl/awsmsk":
			t.Errorf("an inbox consumer links %s", dep)
		case p == "pkg/relay" || strings.HasPrefix(p, "pkg/relay/"):
			t.Errorf("an inbox consumer links %s", dep)
		case layer[p] > 1:
			t.Errorf("an inbox consumer links %s (relay layer %d)", dep, layer[p])
		}
	}
}

// wireSchemas are the struct types that declare a wire format, not an API:
// they repeat an API type's fields on purpose, with the format's JSON keys,
// so that a change to the API type cannot change the format unnoticed.
// contract.Event is the logical message of pg_logical_emit_message (the
// relay decodes it; outbox.Message is the writer's API and EmitTx converts),
// kept in step by the codec's round-trip and fuzz tests and
// TestDriversWriteTheSame.
var wireSchemas = map[string]bool{
	"../internal/contract/event.go: Event": true,
}

// TestNoMirroredStructs fails when two struct types of pkg/ and internal/
// (tests left out) declare the same fields, in the same order (three or
// more): a type declared twice, kept in step by hand or by a conversion.
// Declare it once (pkg/relay/relaytype for what the public API and the
// engine share) and alias or embed it.
func TestNoMirroredStructs(t *testing.T) {
	fset := token.NewFileSet()
	seen := map[string]string{} // field names → the first type declaring them
	for _, root := range []string{"../pkg", "../internal"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return true
				}
				var names []string
				for _, fl := range st.Fields.List {
					for _, nm := range fl.Names {
						names = append(names, nm.Name)
					}
				}
				if len(names) < 3 {
					return true
				}
				key, at := strings.Join(names, ","), p+": "+ts.Name.Name
				if wireSchemas[at] {
					return true
				}
				if first, ok := seen[key]; ok {
					t.Errorf("%s declares the fields of %s (%s): declare the type once", at, first, key)
				} else {
					seen[key] = at
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
