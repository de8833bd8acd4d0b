package testenv_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// A real broker from StartApacheKafka takes a transaction of records on an
// auto-created topic of DefaultPartitions partitions, kcat (read_committed)
// reads them, and Stop leaves neither the JVM nor its directory behind.
func TestApacheKafka(t *testing.T) {
	if os.Getenv(testenv.KafkaModeEnv) != "kafka" {
		t.Skipf("starts a JVM of its own: runs with %s=kafka", testenv.KafkaModeEnv)
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := testenv.StartApacheKafka(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.TransactionalID("testenv"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "env", Key: []byte(key), Value: []byte("v-" + key)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	recs := testenv.WaitForRecords(t, k.Brokers, "env", 8, time.Minute)
	if len(recs) != 8 {
		t.Errorf("%d records, want 8", len(recs))
	}
	for _, r := range recs {
		if string(r.Value) != "v-"+string(r.Key) {
			t.Errorf("record %q = %q", r.Key, r.Value)
		}
	}
	topics, err := kadm.NewClient(cl).ListTopics(ctx, "env")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(topics["env"].Partitions); n != testenv.DefaultPartitions {
		t.Errorf("auto-created topic has %d partitions, want %d (as kfake)", n, testenv.DefaultPartitions)
	}
	pid := k.PID()
	k.Stop()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("broker process %d after Stop: kill -0 = %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat(k.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after Stop: %v", k.Dir, err)
	}
}
