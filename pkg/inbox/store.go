package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
)

// Store is the inbox's admin API: counts per status, listing, retention and
// revival of an inbox table, for one consumer or all of them, on the
// database of a Driver. The command inbox is built on it.
type Store struct {
	table string // sanitized
	q     dbdriver.Querier
}

// errNoStatements refuses a handle that only begins transactions.
var errNoStatements = errors.New("inbox: the Store runs single statements: its driver needs a *pgxpool.Pool, *pgx.Conn, *sql.DB or *sql.Conn")

// NewStore returns a Store for table ("table" or "schema.table"; empty means
// public.inbox) on driver's database, the driver an Inbox takes:
//
//	store, err := inbox.NewStore(inbox.Pgx(pool), "")
//
// Each of its statements commits on its own.
func NewStore[TTx any](driver *Driver[TTx], table string) (*Store, error) {
	if err := driver.check(); err != nil {
		return nil, err
	}
	q := driver.h.DB.Autocommit()
	if q == nil {
		return nil, errNoStatements
	}
	if table == "" {
		table = DefaultTable
	}
	t, err := pgname.Parse(table, "public")
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	return &Store{table: t.Sanitize(), q: q}, nil
}

// StatusCount is the number of rows of one consumer in one status. Its JSON
// keys are snake_case, like every JSON the CLIs print.
type StatusCount struct {
	Consumer string `json:"consumer"`
	Status   Status `json:"status"`
	Count    int64  `json:"count"`
	// Oldest is the earliest received_at among the rows.
	Oldest time.Time `json:"oldest"`
	// Stuck counts PROCESSING rows whose lease expired: a two-phase handler
	// crashed or hangs; the next delivery takes them over.
	Stuck int64 `json:"stuck"`
}

// Counts counts rows per consumer and status (consumer "" means all), in
// consumer and state-machine order. The command "inbox status" prints it.
func (s *Store) Counts(ctx context.Context, consumer string) ([]StatusCount, error) {
	return s.counts(ctx, s.q, consumer)
}

func (s *Store) counts(ctx context.Context, q dbdriver.Querier, consumer string) ([]StatusCount, error) {
	rows, err := q.Query(ctx, onTable(s.table, `SELECT consumer, status, count(*), min(received_at),
		count(*) FILTER (WHERE status = 'PROCESSING' AND coalesce(locked_until < now(), true))
		FROM {T} WHERE ($1 = '' OR consumer = $1)
		GROUP BY consumer, status
		ORDER BY consumer, array_position(ARRAY['RECEIVED','PROCESSING','COMPLETED','FAILED_RETRYABLE','FAILED_FINAL'], status)`), consumer)
	out, err := dbdriver.Collect(rows, err, func(r dbdriver.Rows) (StatusCount, error) {
		var c StatusCount
		err := r.Scan(&c.Consumer, &c.Status, &c.Count, &c.Oldest, &c.Stuck)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("inbox: counts: %w", err)
	}
	return out, nil
}

// HasRows reports whether consumer has any row in the table.
func (s *Store) HasRows(ctx context.Context, consumer string) (bool, error) {
	rows, err := s.q.Query(ctx, onTable(s.table, `SELECT EXISTS (SELECT FROM {T} WHERE consumer = $1)`), consumer)
	found, err := dbdriver.Collect(rows, err, func(r dbdriver.Rows) (bool, error) {
		var b bool
		err := r.Scan(&b)
		return b, err
	})
	if err != nil {
		return false, fmt.Errorf("inbox: has rows: %w", err)
	}
	return len(found) == 1 && found[0], nil
}

// Record is one inbox row. Its JSON keys are the table's column names
// (snake_case), like every JSON the CLIs print.
type Record struct {
	Consumer    string `json:"consumer"`
	MessageID   string `json:"message_id"`
	BusinessKey string `json:"business_key"`
	Status      Status `json:"status"`
	Attempts    int    `json:"attempts"`
	LastError   string `json:"last_error"`
	ResultRef   string `json:"result_ref"`
	// RequestRef is what the last two-phase attempt saved with
	// SaveRequestRef before calling out ("" when none).
	RequestRef  string     `json:"request_ref"`
	LockedUntil *time.Time `json:"locked_until"`
	Topic       string     `json:"topic"`
	Partition   int        `json:"partition"`
	Offset      int64      `json:"offset"`
	ReceivedAt  time.Time  `json:"received_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	CompletedAt *time.Time `json:"completed_at"`
	// DeadLetteredAt is when the consumer loop wrote the message to the
	// dead-letter topic.
	DeadLetteredAt *time.Time `json:"dead_lettered_at"`
}

// ListParams selects rows for List.
type ListParams struct {
	// Consumer filters on one consumer; empty means all.
	Consumer string
	// Status filters on one status; empty means all.
	Status Status
	// Limit caps the rows returned. Defaults to 100.
	Limit int
}

// List returns rows, oldest first.
func (s *Store) List(ctx context.Context, p ListParams) ([]Record, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.q.Query(ctx, onTable(s.table, `SELECT consumer, message_id, business_key, status, attempts,
		coalesce(last_error, ''), coalesce(result_ref, ''), coalesce(request_ref, ''), locked_until,
		coalesce(topic, ''), coalesce("partition", 0), coalesce("offset", 0), received_at, updated_at, completed_at, dead_lettered_at
		FROM {T} WHERE ($1 = '' OR consumer = $1) AND ($2 = '' OR status = $2)
		ORDER BY received_at, consumer, message_id LIMIT $3`), p.Consumer, string(p.Status), p.Limit)
	out, err := dbdriver.Collect(rows, err, func(r dbdriver.Rows) (Record, error) {
		var x Record
		err := r.Scan(&x.Consumer, &x.MessageID, &x.BusinessKey, &x.Status, &x.Attempts, &x.LastError,
			&x.ResultRef, &x.RequestRef, &x.LockedUntil, &x.Topic, &x.Partition, &x.Offset, &x.ReceivedAt, &x.UpdatedAt, &x.CompletedAt, &x.DeadLetteredAt)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("inbox: list: %w", err)
	}
	return out, nil
}

// PurgeParams selects rows for Purge.
type PurgeParams struct {
	// Consumer limits the purge to one consumer; empty means all.
	Consumer string
	// OlderThan is the retention: rows last updated longer ago are deleted.
	// Required (> 0).
	OlderThan time.Duration
	// Status is the status to purge. Defaults to COMPLETED; FAILED_FINAL
	// rows are only purged when asked for explicitly.
	Status Status
	// BatchSize is the number of rows deleted per statement, so that a large
	// purge never holds many locks or one long transaction. Defaults to 1000.
	BatchSize int
}

// ErrBadParams is returned for invalid Purge or Revive parameters.
var ErrBadParams = errors.New("inbox: invalid parameters")

// Purge deletes rows older than the retention in batches, each in its own
// statement, and returns how many it deleted. Duplicates of a purged message
// are no longer recognised: keep the retention well above the longest
// redelivery window (Kafka retention, relay replays).
func (s *Store) Purge(ctx context.Context, p PurgeParams) (int64, error) {
	return s.purge(ctx, s.q, p)
}

func (s *Store) purge(ctx context.Context, q dbdriver.Querier, p PurgeParams) (int64, error) {
	if p.OlderThan <= 0 {
		return 0, fmt.Errorf("%w: purge retention must be positive", ErrBadParams)
	}
	if p.Status == "" {
		p.Status = StatusCompleted
	}
	if p.Status == StatusProcessing {
		return 0, fmt.Errorf("%w: PROCESSING rows are never purged", ErrBadParams)
	}
	if p.BatchSize <= 0 {
		p.BatchSize = 1000
	}
	// COMPLETED rows age from completed_at (BRIN-indexed), others from
	// their last update.
	age := "updated_at"
	if p.Status == StatusCompleted {
		age = "completed_at"
	}
	var total int64
	for {
		n, err := q.Exec(ctx, onTable(s.table, `DELETE FROM {T} WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM {T}
			WHERE status = $1 AND ($2 = '' OR consumer = $2)
			  AND {AGE} < now() - $3::bigint * interval '1 microsecond'
			LIMIT $4 FOR UPDATE SKIP LOCKED))`, "{AGE}", age),
			string(p.Status), p.Consumer, p.OlderThan.Microseconds(), p.BatchSize)
		if err != nil {
			return total, fmt.Errorf("inbox: purge: %w", err)
		}
		total += n
		if n < int64(p.BatchSize) {
			return total, nil
		}
	}
}

// ReviveParams selects FAILED_FINAL rows for Revive.
type ReviveParams struct {
	// Consumer is the consumer of the rows. Required.
	Consumer string
	// MessageIDs lists the messages to revive; empty means every
	// FAILED_FINAL message of the consumer.
	MessageIDs []string
}

// Revive makes FAILED_FINAL messages processable again: status
// FAILED_RETRYABLE with attempts reset to 0 (the last error is kept). The next
// delivery of such a message runs the handler; re-publish it (for example
// from the dead-letter topic) since its offset was committed. It returns the
// number of rows revived. A two-phase handler still running from before the
// revival cannot complete the new claim even when the attempt counts match:
// completion is fenced on the lease's end too.
func (s *Store) Revive(ctx context.Context, p ReviveParams) (int64, error) {
	if p.Consumer == "" {
		return 0, fmt.Errorf("%w: revive needs a consumer", ErrBadParams)
	}
	ids := p.MessageIDs
	if ids == nil {
		ids = []string{}
	}
	n, err := s.q.Exec(ctx, onTable(s.table, `UPDATE {T} SET status = 'FAILED_RETRYABLE', attempts = 0,
		locked_until = NULL, dead_lettered_at = NULL, updated_at = now()
		WHERE consumer = $1 AND status = 'FAILED_FINAL' AND (cardinality($2::text[]) = 0 OR message_id = ANY ($2))`),
		p.Consumer, ids)
	if err != nil {
		return 0, fmt.Errorf("inbox: revive: %w", err)
	}
	return n, nil
}
