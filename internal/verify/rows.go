package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// readRows reads the window's rows, routes each as the relay does, and
// sorts them by message ID. The table is read in one statement, in no
// order (the sort is ours, bounded in memory), so that a large window
// costs the database a range scan and no sort.
func (v *verifier) readRows(ctx context.Context) error {
	c := v.c
	conn := c.Conn
	var hasTopic bool
	var trackCommit string
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'topic' AND attnum > 0 AND NOT attisdropped),
		current_setting('track_commit_timestamp')`, c.Table.Sanitize()).Scan(&hasTopic, &trackCommit)
	if err != nil {
		return fmt.Errorf("verify: read the columns of %s: %w", c.Table, err)
	}
	topicCol, commitCol := `NULL::text`, `NULL::timestamptz`
	if hasTopic {
		topicCol = `o.topic::text`
	}
	if trackCommit == "on" {
		commitCol = `pg_xact_commit_timestamp(o.xmin)`
	}
	q := `SELECT o.id::text, o.aggregate_type::text, o.event_type::text, o.aggregate_id::text, o.business_key::text, ` +
		topicCol + `, o.created_at, ` + commitCol + ` FROM ` + c.Table.Sanitize() + ` AS o WHERE o.created_at >= $1 AND o.created_at < $2`
	rows, err := conn.Query(ctx, q, c.From, c.To)
	if err != nil {
		return fmt.Errorf("verify: read %s: %w", c.Table, err)
	}
	defer rows.Close()
	var (
		id, aggType, eventType, aggID, bk, topic []byte
		createdAt                                time.Time
		commitAt                                 *time.Time
	)
	for rows.Next() {
		if err := rows.Scan(&id, &aggType, &eventType, &aggID, &bk, &topic, &createdAt, &commitAt); err != nil {
			return fmt.Errorf("verify: read %s: %w", c.Table, err)
		}
		v.rep.Rows++
		parsed, err := uuid.ParseBytes(id)
		if err != nil {
			v.rep.InvalidIDs++
			continue
		}
		e := rowEntry{
			id:          parsed,
			topic:       v.topics.intern(c.Route(aggType, eventType, topic)),
			createdAt:   createdAt.UnixMicro(),
			aggregateID: string(aggID),
			businessKey: string(bk),
		}
		if commitAt != nil {
			e.commitAt = commitAt.UnixMicro()
		}
		if err := v.rows.add(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("verify: read %s: %w", c.Table, err)
	}
	return nil
}
