package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/pgserver"
)

// The shared server is a copy of the cached data-directory template of
// its binaries (written once, then reused): it has the template's system
// identifier, and a server of its own (NewServer, initdb) another.
func TestSharedServerIsACopyOfTheTemplate(t *testing.T) {
	t.Parallel()
	if os.Getenv(ExternalURLEnv) != "" {
		t.Skipf("%s names an external server", ExternalURLEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := serverBinDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := dataTemplate(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	again, err := dataTemplate(ctx, bin)
	if err != nil || again != tmpl {
		t.Fatalf("the template again: %q, %v; want %q", again, err, tmpl)
	}
	if _, err := os.Stat(filepath.Join(tmpl, "complete")); err != nil {
		t.Fatal(err)
	}
	copied, err := pgserver.StartFromTemplate(ctx, bin, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(copied.Stop)
	sysid := func(url string) string {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var id string
		if err := conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	shared, own := sysid(SharedServer(t).AdminURL), sysid(NewServer(t).AdminURL)
	if want := sysid(copied.AdminURL); shared != want || own == want {
		t.Errorf("system identifiers: shared server %s, own server %s, a copy of the template %s; want the shared one the template's, the own one not", shared, own, want)
	}
}
