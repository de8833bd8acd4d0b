package pgoutbox_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pgoutbox/pgoutbox"
)

// Migrations holds exactly the .sql files of sql/, byte for byte: what a DBA
// applies with psql -f is what the Go API applies.
func TestMigrationsAreTheSQLFolder(t *testing.T) {
	t.Parallel()
	onDisk, err := filepath.Glob("sql/*/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := fs.Glob(pgoutbox.Migrations, "*/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range embedded {
		embedded[i] = filepath.Join("sql", name)
	}
	slices.Sort(onDisk)
	slices.Sort(embedded)
	if len(onDisk) == 0 || !slices.Equal(onDisk, embedded) {
		t.Fatalf("embedded %v, want the files of sql/: %v", embedded, onDisk)
	}
	for _, path := range onDisk {
		disk, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		emb, err := fs.ReadFile(pgoutbox.Migrations, filepath.ToSlash(path[len("sql/"):]))
		if err != nil || !bytes.Equal(disk, emb) {
			t.Errorf("%s: embedded copy differs (%v)", path, err)
		}
	}
}
