package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgoutbox/pgoutbox/internal/tableformat"
)

// readRows reads the window's rows, routes each as the relay does, and
// sorts them by message ID. The table is read in one statement, in no
// order (the sort is ours, bounded in memory), so that a large window
// costs the database a range scan and no sort.
func (v *verifier) readRows(ctx context.Context) error {
	c := v.c
	q, idAsKey, err := v.windowQuery(ctx)
	if err != nil {
		return err
	}
	rows, err := c.Conn.Query(ctx, q, c.From, c.To)
	if err != nil {
		return fmt.Errorf("verify: read %s: %w", c.Table, err)
	}
	defer rows.Close()
	var (
		id, aggType, eventType, topic []byte
		// The aggregate ID and business key are read in place (the
		// driver's buffer, valid until the next row): keep holds a prefix
		// and a hash of each, so a copy of every value (rows of 1 MB
		// aggregate IDs: a GiB of garbage over 1,000 rows, more than a
		// loaded machine's collector keeps up with) is never made.
		aggID, bk pgtype.DriverBytes
		createdAt time.Time
		commitAt  *time.Time
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
		ti, err := v.topics.intern(c.Route(aggType, eventType, topic))
		if err != nil {
			return err
		}
		e := rowEntry{
			id:          parsed,
			topic:       ti,
			createdAt:   createdAt.UnixMicro(),
			aggregateID: v.keep(aggID),
			businessKey: v.keep(bk),
		}
		if idAsKey {
			e.businessKey = v.keep([]byte(parsed.String()))
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

// windowQuery is the statement that reads the window's rows (its
// parameters the window's start and end) as id, aggregate type, event
// type, aggregate ID, business key, topic, creation and commit time;
// idAsKey says the table has no business key column (Debezium's), so the
// message ID serves as one, as the relay's business-key header says.
func (v *verifier) windowQuery(ctx context.Context) (q string, idAsKey bool, err error) {
	c := v.c
	shape := tableformat.Shape(c.Format)
	col := func(i int) string {
		if name := shape.Columns[i].Name; name != "" {
			return `o.` + pgx.Identifier{name}.Sanitize() + `::text`
		}
		return `NULL::text`
	}
	// The optional columns: the topic, and the creation time (which a
	// Debezium table may lack).
	var hasTopic, hasCreatedAt bool
	var trackCommit string
	err = c.Conn.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2 AND attnum > 0 AND NOT attisdropped),
		EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $3 AND attnum > 0 AND NOT attisdropped),
		current_setting('track_commit_timestamp')`, c.Table.Sanitize(), shape.Columns[tableformat.ColTopic].Name, shape.CreatedAt).
		Scan(&hasTopic, &hasCreatedAt, &trackCommit)
	if err != nil {
		return "", false, fmt.Errorf("verify: read the columns of %s: %w", c.Table, err)
	}
	if !hasCreatedAt {
		return "", false, fmt.Errorf("%w: table %s has no %s column: verify selects the window's rows by their creation time", ErrUsage, c.Table, createdAtName(shape))
	}
	topicCol, commitCol := `NULL::text`, `NULL::timestamptz`
	if hasTopic {
		topicCol = col(tableformat.ColTopic)
	}
	if trackCommit == "on" {
		commitCol = `pg_xact_commit_timestamp(o.xmin)`
	}
	created := `o.` + pgx.Identifier{shape.CreatedAt}.Sanitize()
	q = `SELECT ` + col(tableformat.ColID) + `, ` + col(tableformat.ColAggregateType) + `, ` + col(tableformat.ColEventType) + `, ` +
		col(tableformat.ColAggregateID) + `, ` + col(tableformat.ColBusinessKey) + `, ` + topicCol + `, ` + created + `::timestamptz, ` + commitCol +
		` FROM ` + c.Table.Sanitize() + ` AS o WHERE ` + created + ` >= $1 AND ` + created + ` < $2`
	return q, shape.IDIsBusinessKey(), nil
}

// createdAtName names the creation-time column shape selects rows by, for
// an error saying it is missing.
func createdAtName(shape *tableformat.TableShape) string {
	if shape.CreatedAt == "" {
		return "creation-time"
	}
	return pgx.Identifier{shape.CreatedAt}.Sanitize()
}
