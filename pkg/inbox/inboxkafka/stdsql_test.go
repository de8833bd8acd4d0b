package inboxkafka_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// The two-phase consumer loop on database/sql.
func TestSQLConsumerExternal(t *testing.T) {
	t.Parallel()
	k, topic := inboxtest.NewKafka(t, "sqlext", 1)
	group := k.Topic("sqlext-group")
	b := inboxtest.SetupSQL(t, nil)
	inboxtest.Produce(t, k.Brokers, topic,
		inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{}`},
		inboxtest.Rec{ID: "m-2", Key: "k-2", Value: `{}`},
		inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{}`})
	var calls sync.Map
	inboxtest.RunConsumer(t, &inboxkafka.Config[*sql.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.SQLIn, MaxWait: inboxtest.MaxWait,
		SessionTimeout: time.Second,
		ExternalHandler: func(ctx context.Context, msg inbox.Message, key string) (string, error) {
			if _, dup := calls.LoadOrStore(key, true); dup {
				t.Errorf("external effect %s made twice", key)
			}
			return "ext-" + key, nil
		},
	}, map[int]int64{0: 3})
	for _, id := range []string{"m-1", "m-2"} {
		if r := inboxtest.ReadRow(t, b.DB, "billing", id); r.Status != "COMPLETED" || r.ResultRef == nil || *r.ResultRef != "ext-k"+id[1:] {
			t.Fatalf("row %s: %+v", id, r)
		}
	}
}

// A consumer on database/sql takes exactly one handler and an Inbox made by
// inbox.New; a handler of the other driver, or one without a database, no
// longer compiles (the inboxkafka.Config carries the Inbox's transaction
// type, and the Inbox its database), and a nil database is refused by New.
func TestSQLConsumerConfigChecked(t *testing.T) {
	t.Parallel()
	if _, err := inbox.New(inbox.SQL(nil), &inbox.Config{Consumer: "c"}); err == nil {
		t.Error("no db: accepted")
	}
	in, err := inbox.New(inbox.SQL(&sql.DB{}), &inbox.Config{Consumer: "c"})
	if err != nil {
		t.Fatal(err)
	}
	base := inboxkafka.Config[*sql.Tx]{Brokers: []string{"x"}, GroupID: "g", Topics: []string{"t"}, Inbox: in}
	handler := func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "", nil }
	for name, mod := range map[string]func(c *inboxkafka.Config[*sql.Tx]){
		"no handler": func(c *inboxkafka.Config[*sql.Tx]) {},
		"two handlers": func(c *inboxkafka.Config[*sql.Tx]) {
			c.Handler = handler
			c.ExternalHandler = func(context.Context, inbox.Message, string) (string, error) { return "", nil }
		},
		"zero Inbox": func(c *inboxkafka.Config[*sql.Tx]) {
			c.Handler = handler
			c.Inbox = &inbox.Inbox[*sql.Tx]{}
		},
	} {
		c := base
		mod(&c)
		if _, err := inboxkafka.New(&c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := base
	c.Handler = handler
	if _, err := inboxkafka.New(&c); err != nil {
		t.Fatal(err)
	}
}
