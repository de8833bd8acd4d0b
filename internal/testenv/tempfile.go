package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TempFile writes content to a file called name in a temporary directory
// removed when the test ends, readable by its owner only (as a secret or a
// fleet file should be), and returns its path.
func TempFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
