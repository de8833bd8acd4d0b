package inboxcli_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/inboxcli"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// run runs the CLI and returns its exit code, stdout and stderr.
func run(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr testenv.SyncBuffer
	code := inboxcli.Run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := run(t, context.Background(), args...)
	if code != 0 {
		t.Fatalf("inbox %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func TestAdminCommands(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	url := "--database-url=" + db.URL

	if out := mustRun(t, url, "migrate"); !strings.Contains(out, "applied migrations [1 2 3 4]") {
		t.Fatalf("migrate: %q", out)
	}
	if out := mustRun(t, url, "migrate"); !strings.Contains(out, "public.inbox is up to date") {
		t.Fatalf("second migrate: %q", out)
	}

	in, err := inbox.New(inbox.Pgx(db.Pool), &inbox.Config{Consumer: "billing", MaxAttempts: 1, LeaseDuration: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, pgx.Tx, inbox.Message) (string, error) { return "ref", nil }
	bad := func(context.Context, pgx.Tx, inbox.Message) (string, error) { return "", errors.New("card declined") }
	for _, m := range []inbox.Message{{ID: "m-1", BusinessKey: "k-1"}, {ID: "m-2", BusinessKey: "k-2"}} {
		if _, err := in.Process(ctx, m, ok); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := in.Process(ctx, inbox.Message{ID: "m-bad", BusinessKey: "k-bad", Topic: "payments", Partition: 2, Offset: 7}, bad); err != nil || res.Outcome != inbox.DeadLettered {
		t.Fatal(res, err)
	}
	// A stuck two-phase claim: leased, then the lease expired.
	stuck, release, released := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(released)
		_, _ = in.ProcessExternal(ctx, inbox.Message{ID: "m-ext", BusinessKey: "k-ext"}, func(ctx context.Context, _ inbox.Message, _ string) (string, error) {
			if err := inbox.SaveRequestRef(ctx, "req-ext-1"); err != nil {
				t.Error(err)
			}
			close(stuck)
			<-release // a hung handler
			return "", errors.New("gave up")
		})
	}()
	<-stuck
	if _, err := db.Pool.Exec(ctx, `UPDATE inbox SET locked_until = now() - interval '1 minute' WHERE message_id = 'm-ext'`); err != nil {
		t.Fatal(err)
	}

	out := mustRun(t, url, "status")
	for _, want := range []string{"CONSUMER", "billing   PROCESSING    1      1", "billing   COMPLETED     2      0", "billing   FAILED_FINAL  1      0"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status output lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, url, "status", "--json"); !strings.Contains(out, `"stuck": 1`) {
		t.Fatalf("status --json: %s", out)
	}
	close(release)
	<-released

	// The reference a two-phase attempt saved before calling out shows.
	if out := mustRun(t, url, "list", "--consumer", "billing"); !regexp.MustCompile(`m-ext .* req-ext-1 `).MatchString(out) {
		t.Fatalf("list shows no request reference: %s", out)
	}
	// No rows: an empty list, not null.
	if out := mustRun(t, url, "list", "--consumer", "nobody", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("list --json without rows: %q, want []", out)
	}
	// --json keys are snake_case, like relay status --json.
	if out := mustRun(t, url, "list", "--status", "failed_final", "--json"); !strings.Contains(out, `"message_id": "m-bad"`) ||
		!strings.Contains(out, `"dead_lettered_at": `) {
		t.Fatalf("list --json: %s", out)
	}
	out = mustRun(t, url, "list", "--status", "failed_final")
	if !strings.Contains(out, "m-bad") || !strings.Contains(out, "payments/2@7") || !strings.Contains(out, "card declined") || strings.Contains(out, "m-1") {
		t.Fatalf("list: %s", out)
	}

	if out := mustRun(t, url, "revive", "--consumer", "billing", "m-bad"); !strings.Contains(out, "revived 1 messages of billing") {
		t.Fatalf("revive: %q", out)
	}
	if res, err := in.Process(ctx, inbox.Message{ID: "m-bad", BusinessKey: "k-bad"}, ok); err != nil || res.Outcome != inbox.Processed {
		t.Fatalf("after revive: %+v, %v", res, err)
	}

	// An explicit ID that matched nothing is an error, the others are revived.
	code, out, errOut := run(t, ctx, "revive", "--consumer", "billing", "nosuchid", url)
	if code != inboxcli.ExitFailure || out != "" || !strings.Contains(errOut, "1 of the 1 given message IDs are not FAILED_FINAL messages") {
		t.Fatalf("revive nosuchid: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out := mustRun(t, "revive", url, "--consumer", "billing", "--all"); out != "revived nothing: billing has no FAILED_FINAL messages\n" {
		t.Fatalf("revive --all of nothing: %q", out)
	}
	if out := mustRun(t, url, "purge", "--older-than", "1h"); !strings.Contains(out, "purged nothing: no COMPLETED rows older than 1h") {
		t.Fatalf("purge: %q", out)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE inbox SET completed_at = now() - interval '2 days' WHERE message_id IN ('m-1', 'm-2')`); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, url, "purge", "--older-than", "1d", "--batch-size", "1"); !strings.Contains(out, "purged 2 COMPLETED rows") {
		t.Fatalf("purge: %q", out)
	}
	var left int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE status = 'COMPLETED'`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("COMPLETED rows left: %d, %v", left, err)
	}
}

func TestCustomTableFromEnv(t *testing.T) {
	db := testenv.NewDB(t)
	t.Setenv("INBOX_DATABASE_URL", db.URL)
	t.Setenv("INBOX_TABLE", "ops.consumer_inbox")
	if _, err := db.Pool.Exec(context.Background(), `CREATE SCHEMA ops`); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, "migrate"); !strings.Contains(out, "ops.consumer_inbox: applied migrations [1 2 3 4]") {
		t.Fatalf("migrate: %q", out)
	}
	if out := mustRun(t, "status"); strings.TrimSpace(out) != "CONSUMER  STATUS  COUNT  STUCK  OLDEST" {
		t.Fatalf("status of an empty table: %q", out)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"status"}, inboxcli.ExitUsage, "--database-url (INBOX_DATABASE_URL) is required"},
		{[]string{"--database-url=postgres://u:secret@127.0.0.1:1/x", "purge"}, inboxcli.ExitUsage, "--older-than is required"},
		{[]string{"--database-url=postgres://u:secret@127.0.0.1:1/x", "purge", "--older-than", "soon"}, inboxcli.ExitUsage, "bad age"},
		{[]string{"--database-url=postgres://u:secret@127.0.0.1:1/x", "list", "--status", "DONE"}, inboxcli.ExitUsage, `--status "DONE": want one of RECEIVED, PROCESSING, COMPLETED, FAILED_RETRYABLE, FAILED_FINAL`},
		{[]string{"list", "--database-url=postgres://u:secret@127.0.0.1:1/x", "--status", "failed"}, inboxcli.ExitUsage, `inbox: --status "failed": want one of`},
		{[]string{"bogus"}, inboxcli.ExitUsage, `unknown command "bogus" (commands: migrate, status, purge, list, revive, tail`},
		{[]string{"tail", "--database-url=postgres://u:secret@127.0.0.1:1/x", "--brokers", "b:1", "--topics", "t", "--conflict-policy", "x"}, inboxcli.ExitUsage, `--conflict-policy "x": want stop or dead-letter`},
		{[]string{"tail", "--database-url=postgres://u:secret@127.0.0.1:1/x", "--brokers", "b:1", "--topics", "t", "--conflict-policy", "error"}, inboxcli.ExitUsage, `--conflict-policy "error": want stop or dead-letter`},
		{[]string{"tail", "--database-url=postgres://u:secret@127.0.0.1:1/x", "--brokers", "b:1", "--topics", "t", "--isolation", "serializable"}, inboxcli.ExitUsage, `--isolation "serializable": want read_committed or read_uncommitted`},
		{[]string{"--database-url=postgres://u:secret@127.0.0.1:1/x", "revive", "m-1"}, inboxcli.ExitUsage, "--consumer is required"},
		{[]string{"--database-url=postgres://u:secret@127.0.0.1:1/x", "tail"}, inboxcli.ExitUsage, "--brokers and --topics are required"},
		{[]string{"--database-url=postgres://u:secret@127.0.0.1:1/x", "--log-level=error", "status"}, inboxcli.ExitFailure, "connect to u@127.0.0.1:1/x"},
		{[]string{"tail", "--database-url=postgres://u:secret@127.0.0.1:1/x", "--brokers", "b:1", "--topics", "t", "--kafka-sasl-mechanism", "plain", "--kafka-sasl-username", "u"}, inboxcli.ExitUsage, "--kafka-allow-insecure-sasl"},
		{[]string{"--bogus"}, inboxcli.ExitUsage, "unknown flag --bogus"},
		{[]string{"migrate", "--bogus"}, inboxcli.ExitUsage, "unknown flag --bogus"},
	}
	for _, tc := range cases {
		code, _, errOut := run(t, context.Background(), tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 ||
			strings.Count(errOut, "inbox: ") != 1 {
			t.Errorf("inbox %v: exit %d, stderr %q; want exit %d and one line with %q", tc.args, code, errOut, tc.code, tc.msg)
		}
		if strings.Contains(errOut, "secret") {
			t.Errorf("inbox %v leaked the password: %q", tc.args, errOut)
		}
	}
}

func TestHelpExplainsEveryCommand(t *testing.T) {
	t.Parallel()
	out := mustRun(t, "--help")
	for _, cmd := range []string{"migrate", "status", "purge", "list", "revive", "tail", "INBOX_DATABASE_URL"} {
		if !strings.Contains(out, cmd) {
			t.Fatalf("help lacks %s:\n%s", cmd, out)
		}
	}
	for _, cmd := range []string{"migrate", "status", "purge", "list", "revive", "tail"} {
		if a, b := mustRun(t, cmd, "--help"), mustRun(t, "help", cmd); a != b {
			t.Fatalf("inbox help %s differs from inbox %s --help", cmd, cmd)
		}
		out := mustRun(t, cmd, "--help")
		if !strings.Contains(out, "DESCRIPTION:") || !strings.Contains(out, "--database-url value") || !strings.Contains(out, "$INBOX_TABLE") ||
			!strings.Contains(out, "INBOX_DATABASE_URL_FILE") {
			t.Fatalf("%s --help has no description:\n%s", cmd, out)
		}
	}
}

// tail takes the relay's Kafka TLS and SASL flags, with INBOX_* variables.
func TestTailKafkaSecurityFlags(t *testing.T) {
	t.Parallel()
	out := mustRun(t, "tail", "--help")
	for _, f := range []string{"kafka-tls", "kafka-tls-ca-file", "kafka-tls-cert-file", "kafka-tls-key-file",
		"kafka-tls-insecure-skip-verify", "kafka-sasl-mechanism", "kafka-sasl-username", "kafka-sasl-password", "kafka-allow-insecure-sasl"} {
		env := "$INBOX_" + strings.ToUpper(strings.ReplaceAll(f, "-", "_"))
		if !strings.Contains(out, "--"+f+" ") || !strings.Contains(out, env) {
			t.Errorf("inbox tail --help lacks --%s or %s", f, env)
		}
	}
}

// newKafka is the tail tests' broker (testenv.NewBroker: kfake, or the
// shared Apache Kafka with PGOUTBOX_TEST_KAFKA=kafka) with a topic "orders"
// of one partition, and the names of that topic and of its dead-letter
// topic on it. Name consumer groups and transactional IDs with k.Topic.
func newKafka(t *testing.T) (k *testenv.Kafka, topic, dlq string) {
	t.Helper()
	k = testenv.NewBroker(t)
	topic, dlq = k.Topic("orders"), k.Topic("orders.dlq")
	k.CreateTopics(t, 1, topic)
	return k, topic, dlq
}

func TestTail(t *testing.T) {
	t.Parallel()
	k, topic, dlq := newKafka(t)
	db := testenv.NewDB(t)
	mustRun(t, "--database-url="+db.URL, "migrate")

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	h := func(id, key string) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: "message-id", Value: []byte(id)}, {Key: "business-key", Value: []byte(key)}}
	}
	err = cl.ProduceSync(context.Background(),
		&kgo.Record{Value: []byte(`{"n":1}`), Headers: h("m-1", "k-1")},
		&kgo.Record{Value: []byte(`{"n":1}`), Headers: h("m-1", "k-1")},
		&kgo.Record{Value: []byte(`{"n":2}`)},
		// Terminal escapes (window title, colour) and a newline that would
		// forge an output line, from the producer's headers.
		&kgo.Record{Value: []byte(`{"n":3}`), Headers: h("m-\x1b]0;pwned\x07", "k-\x1b[31m\norders/0@9 m-9 k-9 processed")},
	).FirstErr()
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- inboxcli.Run(ctx, []string{"--database-url=" + db.URL, "tail", "--brokers", strings.Join(k.Brokers, ","),
			"--topics", topic, "--dlq-topic", dlq, "--group", k.Topic("inbox-tail")}, &stdout, &stderr)
	}()
	want := []string{
		topic + "/0@0 m-1 k-1 processed",
		topic + "/0@1 m-1 k-1 duplicate",
		topic + "/0@2 - - dead-lettered reason=missing-headers",
		topic + `/0@3 "m-\x1b]0;pwned\a" "k-\x1b[31m\norders/0@9 m-9 k-9 processed" processed`,
	}
	deadline := time.Now().Add(time.Minute)
	for strings.Count(stdout.String(), "\n") < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("tail printed %q; stderr %q", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("tail exit %d: %s", code, stderr.String())
	}
	if got := strings.Split(strings.TrimSpace(stdout.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tail printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	recs := testenv.WaitForRecords(t, k.Brokers, dlq, 1, time.Minute)
	if reason, _ := recs[0].Header("dlq-reason"); reason != "missing-headers" || string(recs[0].Value) != `{"n":2}` {
		t.Fatalf("dead letter %+v", recs[0])
	}
}

// inbox list prints message IDs, business keys, request references and
// last errors (from Kafka, handlers and external APIs) quoted when they hold
// anything but printable characters: no terminal escape reaches the
// terminal and no newline forges a row.
func TestListQuotesUntrustedText(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	url := "--database-url=" + db.URL
	mustRun(t, url, "migrate")
	in, err := inbox.New(inbox.Pgx(db.Pool), &inbox.Config{Consumer: "billing", MaxAttempts: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	msg := inbox.Message{ID: "m-\x1b]0;pwned\x07", BusinessKey: "k-1\nbilling  m-2  k-2  COMPLETED", Topic: "payments", Partition: 1, Offset: 5}
	fail := func(context.Context, pgx.Tx, inbox.Message) (string, error) {
		return "", errors.New("gateway said: \x1b[2J\x1b[31mcleared\r\nok")
	}
	if res, err := in.Process(ctx, msg, fail); err != nil || res.Outcome != inbox.DeadLettered {
		t.Fatal(res, err)
	}
	out := mustRun(t, url, "list")
	if strings.ContainsAny(out, "\x1b\x07\r") || strings.Count(out, "\n") != 2 {
		t.Fatalf("list printed raw control characters or extra lines:\n%q", out)
	}
	for _, want := range []string{`"m-\x1b]0;pwned\a"`, `"k-1\nbilling  m-2  k-2  COMPLETED"`, `"gateway said: \x1b[2J\x1b[31mcleared\r\nok"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("list lacks %s:\n%s", want, out)
		}
	}
}

// tail refuses a consumer name that already has rows: its no-op handler
// would mark that consumer's messages COMPLETED.
func TestTailRefusesARealConsumer(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	url := "--database-url=" + db.URL
	mustRun(t, url, "migrate")
	in, err := inbox.New(inbox.Pgx(db.Pool), &inbox.Config{Consumer: "billing", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, pgx.Tx, inbox.Message) (string, error) { return "", nil }
	if _, err := in.Process(context.Background(), inbox.Message{ID: "m-1", BusinessKey: "k-1"}, ok); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, context.Background(), url, "tail", "--brokers", "127.0.0.1:1", "--topics", "orders",
		"--consumer", "billing")
	if code != inboxcli.ExitUsage || !strings.Contains(errOut, `consumer "billing" already has rows`) ||
		!strings.Contains(errOut, "--force") {
		t.Fatalf("tail --consumer billing: exit %d, stderr %q", code, errOut)
	}
}

// inbox tail reads read_committed by default: the records of an aborted
// Kafka transaction (a fenced exactly-once relay's) never reach the
// handler, and the transaction markers are never handed out as records
// (kafka-go did: segmentio/kafka-go#1332). --isolation read_uncommitted
// reads the aborted record too.
func TestTailReadsCommitted(t *testing.T) {
	t.Parallel()
	k, topic, dlq := newKafka(t)
	db := testenv.NewDB(t)
	mustRun(t, "--database-url="+db.URL, "migrate")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.TransactionalID(k.Topic("tail-test")), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txn := func(id string, end kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rec := &kgo.Record{Value: []byte(`{}`), Headers: []kgo.RecordHeader{{Key: "message-id", Value: []byte(id)}, {Key: "business-key", Value: []byte("k-" + id)}}}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	txn("m-aborted", kgo.TryAbort)
	txn("m-committed", kgo.TryCommit)

	tail := func(group string, extra ...string) []string {
		t.Helper()
		tailCtx, stop := context.WithCancel(ctx)
		defer stop()
		var stdout, stderr testenv.SyncBuffer
		done := make(chan int, 1)
		go func() {
			done <- inboxcli.Run(tailCtx, append([]string{"--database-url=" + db.URL, "tail", "--brokers", strings.Join(k.Brokers, ","),
				"--topics", topic, "--dlq-topic", dlq, "--group", k.Topic(group), "--consumer", group}, extra...), &stdout, &stderr)
		}()
		testenv.WaitFor(t, time.Minute, "tail printing the committed record", func() (bool, error) {
			return strings.Contains(stdout.String(), "m-committed"), nil
		})
		stop()
		if code := <-done; code != 0 {
			t.Fatalf("tail exit %d: %s", code, stderr.String())
		}
		return strings.Split(strings.TrimSpace(stdout.String()), "\n")
	}
	// Offsets: the aborted record 0, its abort marker 1, the committed
	// record 2, its commit marker 3.
	if got, want := tail("inbox-tail-rc"), []string{topic + "/0@2 m-committed k-m-committed processed"}; !slices.Equal(got, want) {
		t.Errorf("tail (read_committed) printed %q, want %q", got, want)
	}
	got := tail("inbox-tail-ru", "--isolation", "read_uncommitted")
	if want := []string{topic + "/0@0 m-aborted k-m-aborted processed", topic + "/0@2 m-committed k-m-committed processed"}; !slices.Equal(got, want) {
		t.Errorf("tail --isolation read_uncommitted printed %q, want %q", got, want)
	}
}
