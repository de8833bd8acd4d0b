package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox"
)

// make release builds the relay and inbox binaries with the version it is
// given stamped in (-ldflags -X), so that `relay --version` and
// `inbox --version` print it, and lists their sha256 in SHA256SUMS. The test
// runs the Makefile's own target, for this machine's platform only.
func TestReleaseStampsVersion(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	const version = "v0.1.0-releasetest.1"
	root := moduleRoot(t)
	dist := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	cmd := exec.CommandContext(ctx, "make", "-C", root, "release", "VERSION="+version, "PLATFORMS="+platform, "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	sums := readSums(t, filepath.Join(dist, "SHA256SUMS"))
	for _, name := range []string{"relay", "inbox"} {
		file := name + "-" + version + "-" + runtime.GOOS + "-" + runtime.GOARCH
		bin := filepath.Join(dist, file)
		out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", file, err, out)
		}
		if want := name + " " + version + " ("; !strings.HasPrefix(string(out), want) {
			t.Errorf("%s --version printed %q, want it to start with %q", file, out, want)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got, want := sums[file], hex.EncodeToString(sum[:]); got != want {
			t.Errorf("SHA256SUMS has %q for %s, want %q", got, file, want)
		}
	}
	if len(sums) != 2 {
		t.Errorf("SHA256SUMS lists %d files, want the 2 binaries: %v", len(sums), sums)
	}
}

// moduleRoot is the directory of go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not in a module")
	}
	return filepath.Dir(gomod)
}

// readSums reads a sha256sum listing: file name to hex digest.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		sums[strings.TrimPrefix(file, "*")] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// The version has one home, the VERSION file (pgoutbox.Version), and the
// places a user reads it agree with it: CHANGELOG.md's newest dated
// section, the Helm chart's appVersion (its default image tag) and the
// image tag docs/kubernetes.md installs.
func TestVersionAgrees(t *testing.T) {
	want := strings.TrimPrefix(pgoutbox.Version, "v")
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(want) {
		t.Fatalf("VERSION is %q, want vX.Y.Z", pgoutbox.Version)
	}
	read := func(path string) string {
		b, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		path string
		re   string
	}{
		{"CHANGELOG.md", `(?m)^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d\d-\d\d$`},
		{"deploy/helm/pgoutbox-relay/Chart.yaml", `(?m)^appVersion: "([^"]+)"$`},
		{"docs/kubernetes.md", `image\.tag=(\S+)`},
	} {
		m := regexp.MustCompile(c.re).FindStringSubmatch(read(c.path))
		if m == nil || m[1] != want {
			t.Errorf("%s: version %q, want %s (the VERSION file)", c.path, m, want)
		}
	}
}
