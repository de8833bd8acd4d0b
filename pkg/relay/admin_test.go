package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

func TestSetupStatusTeardown(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := &relay.Config{DatabaseURL: db.URL, Slot: "s_admin", Publication: "p_admin"}

	st, err := relay.Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.SlotExists || st.PublicationExists || st.ConfirmedFlushLSN != "" || st.CurrentWALLSN == "" {
		t.Fatalf("before setup: %+v", st)
	}
	for i := 0; i < 2; i++ { // idempotent
		if err := relay.Setup(ctx, cfg); err != nil {
			t.Fatalf("setup %d: %v", i, err)
		}
	}
	st, err = relay.Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !st.SlotExists || !st.PublicationExists || st.Active || st.ActivePID != nil || st.Table != "public.outbox" ||
		st.ConfirmedFlushLSN == "" || st.RestartLSN == "" || st.WALStatus != "reserved" || st.LagBytes < 0 ||
		st.PublicationMismatch != "" || st.PublicationExtra != "" {
		t.Fatalf("after setup: %+v", st)
	}
	var pubTable string
	var ins, upd, del bool
	if err := db.Pool.QueryRow(ctx, `SELECT t.schemaname || '.' || t.tablename, p.pubinsert, p.pubupdate, p.pubdelete
		FROM pg_publication p JOIN pg_publication_tables t USING (pubname) WHERE p.pubname = 'p_admin'`).Scan(&pubTable, &ins, &upd, &del); err != nil {
		t.Fatal(err)
	}
	if pubTable != "public.outbox" || !ins || upd || del {
		t.Fatalf("publication: table %s insert %v update %v delete %v", pubTable, ins, upd, del)
	}

	// An active slot is refused.
	rc, err := pgconn.Connect(ctx, db.URL+"&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, rc, "s_admin", 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'p_admin'"}}); err != nil {
		t.Fatal(err)
	}
	st, err = relay.Status(ctx, cfg)
	if err != nil || !st.Active || st.ActivePID == nil {
		t.Fatalf("while streaming: %+v %v", st, err)
	}
	if err := relay.Teardown(ctx, cfg); !errors.Is(err, relaytype.ErrSlotActive) {
		t.Fatalf("teardown of an active slot: %v, want ErrSlotActive", err)
	}
	_ = rc.Close(ctx)

	// The walsender exits asynchronously after the client leaves.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = relay.Teardown(ctx, cfg)
		if !errors.Is(err, relaytype.ErrSlotActive) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err = relay.Status(ctx, cfg)
	if err != nil || st.SlotExists || st.PublicationExists {
		t.Fatalf("after teardown: %+v %v", st, err)
	}
	if err := relay.Teardown(ctx, cfg); err != nil {
		t.Fatalf("second teardown: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	err := relay.Setup(context.Background(), &relay.Config{Slot: "Bad-Slot", OnInvalid: "ignore", Kafka: relay.KafkaConfig{Compression: "brotli"}, BufferBytes: -1})
	if !errors.Is(err, relaytype.ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
	want := "relay: invalid configuration: database URL is required\n" +
		"slot \"Bad-Slot\": want 1 to 63 characters of a-z, 0-9 and _\n" +
		"on-invalid \"ignore\": want \"dead-letter\" or \"stop\"\n" +
		"compression \"brotli\": want one of none, gzip, snappy, lz4, zstd\n" +
		"buffer bytes -1 is negative"
	if err.Error() != want {
		t.Fatalf("got %q\nwant %q", err, want)
	}
	if _, err := relay.New(&relay.Config{DatabaseURL: "postgres://x"}); !errors.Is(err, relaytype.ErrConfig) {
		t.Fatalf("New without brokers: %v", err)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://app:s3cret@db:5432/app?sslmode=disable", "postgres://app:xxxxx@db:5432/app?sslmode=disable"},
		{"postgres://app@db/app", "postgres://app@db/app"},
		{"postgres://db/app?password=s3cret&user=app", "postgres://db/app?password=xxxxx&user=app"},
		{"host=db user=app password=s3cret dbname=app", "host=db user=app password=xxxxx dbname=app"},
		{`host=db password = 'it\'s secret' dbname=app`, "host=db password=xxxxx dbname=app"},
		{"host=db sslpassword=keypass1 options='-c x=https://y'", "host=db sslpassword=xxxxx options='-c x=https://y'"},
		{"postgres://app:pa%zz@db/app", "(unparsable connection string)"},
	}
	for _, tt := range tests {
		if got := redact.URL(tt.in); got != tt.want {
			t.Errorf("redact.URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
