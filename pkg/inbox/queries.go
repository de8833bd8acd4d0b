package inbox

import "strings"

// onTable is text with {T} replaced by table (sanitized), and each
// placeholder of columns (pairs of "{NAME}" and a column of the inbox
// table, never a caller's value) by its column: the one way the inbox's
// SQL names its table and picks a column, for the queries built once in
// New and for Store's. No statement is built by concatenation.
func onTable(table, text string, columns ...string) string {
	if len(columns) == 0 {
		return strings.ReplaceAll(text, "{T}", table)
	}
	return strings.NewReplacer(append([]string{"{T}", table}, columns...)...).Replace(text)
}

// queries holds the SQL text for one table, built once in New.
type queries struct {
	claim, markAttempt, markDeadLettered, saveRequestRef, extendLease, claimBatch, completeBatch, completeMarked, lookup, takeover, exhaust, complete, completeFenced, failInTx, failFenced, recordFailure string
}

func newQueries(table string) queries {
	r := func(text string) string { return onTable(table, text) }
	return queries{
		// The claim is the first statement of the transaction. On the
		// transactional path the row is written COMPLETED at once: nobody
		// sees it before the commit, and a handler failure rolls it back,
		// so the PROCESSING step would only cost a second row version. ON CONFLICT
		// without a target covers both the primary key and the business
		// key; a concurrent claimer of either blocks here until the first
		// transaction ends.
		claim: r(`INSERT INTO {T} AS i
			(consumer, message_id, business_key, payload_hash, status, attempts, locked_until,
			 topic, "partition", "offset", received_at, updated_at, completed_at, attempt_started_at)
			VALUES ($1, $2, $3, $4, CASE WHEN $5::bigint > 0 THEN 'PROCESSING' ELSE 'COMPLETED' END, 1,
			 CASE WHEN $5::bigint > 0 THEN now() + $5::bigint * interval '1 microsecond' END,
			 NULLIF($6::text, ''), CASE WHEN $6::text <> '' THEN $7::integer END,
			 CASE WHEN $6::text <> '' THEN $8::bigint END, now(), now(),
			 CASE WHEN $5::bigint > 0 THEN NULL ELSE now() END,
			 CASE WHEN $5::bigint > 0 THEN now() END)
			ON CONFLICT DO NOTHING
			RETURNING attempts, locked_until`),
		// The batch claim is the first statement of a batch transaction;
		// rows come back for the messages it inserted.
		claimBatch: r(`INSERT INTO {T} AS i
			(consumer, message_id, business_key, payload_hash, status, attempts,
			 topic, "partition", "offset", received_at, updated_at, completed_at)
			SELECT $1, u.id, u.key, u.hash, 'COMPLETED', 1,
			 NULLIF(u.topic, ''), CASE WHEN u.topic <> '' THEN u.part END,
			 CASE WHEN u.topic <> '' THEN u.off END, now(), now(), now()
			FROM unnest($2::text[], $3::text[], $4::bytea[], $5::text[], $6::integer[], $7::bigint[])
			 WITH ORDINALITY AS u(id, key, hash, topic, part, off, ord)
			ORDER BY u.ord
			ON CONFLICT DO NOTHING
			RETURNING message_id`),
		completeBatch: r(`UPDATE {T} AS i SET result_ref = u.ref
			FROM unnest($2::text[], $3::text[]) AS u(id, ref)
			WHERE i.consumer = $1 AND i.message_id = u.id`),
		markDeadLettered: r(`UPDATE {T} SET dead_lettered_at = now()
			WHERE consumer = $1 AND business_key = $2 AND status = 'FAILED_FINAL'`),
		lookup: r(`SELECT message_id, business_key, payload_hash, status, attempts,
			coalesce(result_ref, ''), coalesce(locked_until > now(), false), dead_lettered_at IS NOT NULL,
			attempt_started_at, coalesce(request_ref, '')
			FROM {T} WHERE consumer = $1 AND (message_id = $2 OR business_key = $3)
			FOR UPDATE`),
		// completeMarked is the claim of a message whose attempt
		// markAttempt counted in a RECEIVED row (of the same ID, key and
		// payload hash), on the transactional path: like the claim of a new
		// message it writes the row COMPLETED at once, invisible until the
		// commit, undone by a rollback. No row comes back when the row
		// changed meanwhile; the claim then goes the usual way.
		completeMarked: r(`UPDATE {T} SET status = 'COMPLETED', locked_until = NULL, completed_at = now(), updated_at = now()
			WHERE consumer = $1 AND message_id = $2 AND business_key = $3 AND payload_hash = $4 AND status = 'RECEIVED'
			RETURNING attempts`),
		// $7 says that markAttempt already counted this attempt.
		takeover: r(`UPDATE {T} SET status = 'PROCESSING', attempts = attempts + CASE WHEN $7::boolean THEN 0 ELSE 1 END,
			locked_until = CASE WHEN $3::bigint > 0 THEN now() + $3::bigint * interval '1 microsecond' END,
			attempt_started_at = CASE WHEN $3::bigint > 0 THEN now() ELSE attempt_started_at END,
			topic = coalesce(NULLIF($4::text, ''), topic),
			"partition" = CASE WHEN $4::text <> '' THEN $5::integer ELSE "partition" END,
			"offset" = CASE WHEN $4::text <> '' THEN $6::bigint ELSE "offset" END,
			updated_at = now()
			WHERE consumer = $1 AND message_id = $2
			RETURNING attempts, locked_until`),
		// The attempt marker of the consumer loop, committed on its own
		// before a delivery that may repeat one that killed the process: it
		// counts the attempt in a RECEIVED row (a new one, or a RECEIVED or
		// FAILED_RETRYABLE one of the same message), or makes a row whose
		// MaxAttempts ($5) attempts all ended without an outcome
		// FAILED_FINAL. No row comes back for a row in any other state, a
		// conflict, or a business key held by another message ID.
		markAttempt: r(`WITH upd AS (
			UPDATE {T} SET
			 status = CASE WHEN attempts >= $5 THEN 'FAILED_FINAL' ELSE 'RECEIVED' END,
			 last_error = CASE WHEN attempts >= $5 AND status = 'RECEIVED'
			  THEN format('attempt %s of %s ended without an outcome (the process died or hung)', attempts, $5::integer)
			  ELSE last_error END,
			 attempts = CASE WHEN attempts >= $5 THEN attempts ELSE attempts + 1 END,
			 locked_until = NULL,
			 topic = coalesce(NULLIF($6::text, ''), topic),
			 "partition" = CASE WHEN $6::text <> '' THEN $7::integer ELSE "partition" END,
			 "offset" = CASE WHEN $6::text <> '' THEN $8::bigint ELSE "offset" END,
			 updated_at = now()
			WHERE consumer = $1 AND message_id = $2 AND business_key = $3 AND payload_hash = $4
			 AND status IN ('RECEIVED', 'FAILED_RETRYABLE')
			RETURNING status, attempts, coalesce(last_error, '')
		), ins AS (
			INSERT INTO {T} (consumer, message_id, business_key, payload_hash, status, attempts,
			 topic, "partition", "offset", received_at, updated_at)
			SELECT $1, $2, $3, $4, 'RECEIVED', 1,
			 NULLIF($6::text, ''), CASE WHEN $6::text <> '' THEN $7::integer END,
			 CASE WHEN $6::text <> '' THEN $8::bigint END, now(), now()
			WHERE NOT EXISTS (SELECT FROM upd)
			ON CONFLICT DO NOTHING
			RETURNING status, attempts, ''
		)
		SELECT * FROM upd UNION ALL SELECT * FROM ins`),
		// A row out of attempts that a delivery would take over (an expired
		// lease: the handler crashed or hung every time) is final instead.
		exhaust: r(`UPDATE {T} SET status = 'FAILED_FINAL',
			last_error = CASE WHEN status = 'PROCESSING' THEN $3 ELSE coalesce(last_error, $3) END,
			locked_until = NULL, updated_at = now()
			WHERE consumer = $1 AND message_id = $2
			RETURNING last_error`),
		complete: r(`UPDATE {T} SET status = 'COMPLETED', result_ref = NULLIF($3::text, ''),
			locked_until = NULL, completed_at = now(), updated_at = now()
			WHERE consumer = $1 AND message_id = $2`),
		// The fenced variants only touch the row while this delivery still
		// owns it: the takeover of an expired lease bumps attempts and sets
		// a new locked_until. The lease end is the fencing token (attempts
		// alone is not: Revive resets it), unique per claim since each
		// claim's now() is later than the previous lease's end.
		completeFenced: r(`UPDATE {T} SET status = 'COMPLETED', result_ref = NULLIF($3::text, ''),
			locked_until = NULL, completed_at = now(), updated_at = now()
			WHERE consumer = $1 AND message_id = $2 AND status = 'PROCESSING' AND attempts = $4
			 AND locked_until = $5`),
		// Fenced like completeFenced: only the lease's owner writes.
		saveRequestRef: r(`UPDATE {T} SET request_ref = $3, updated_at = now()
			WHERE consumer = $1 AND message_id = $2 AND status = 'PROCESSING' AND attempts = $4
			 AND locked_until = $5`),
		extendLease: r(`UPDATE {T} SET locked_until = now() + $3::bigint * interval '1 microsecond', updated_at = now()
			WHERE consumer = $1 AND message_id = $2 AND status = 'PROCESSING' AND attempts = $4
			 AND locked_until = $5
			RETURNING locked_until`),
		failInTx: r(`UPDATE {T} SET status = $3, last_error = $4, locked_until = NULL, completed_at = NULL, updated_at = now()
			WHERE consumer = $1 AND message_id = $2`),
		failFenced: r(`UPDATE {T} SET status = $3, last_error = $4, locked_until = NULL, updated_at = now()
			WHERE consumer = $1 AND message_id = $2 AND status = 'PROCESSING' AND attempts = $5
			 AND locked_until = $6`),
		// After a rollback the claim row is gone too (or back to its old
		// state), so the failure is an upsert. A row another delivery
		// settled in the meantime is left alone.
		recordFailure: r(`INSERT INTO {T} AS i
			(consumer, message_id, business_key, payload_hash, status, attempts, last_error,
			 topic, "partition", "offset", received_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7,
			 NULLIF($8::text, ''), CASE WHEN $8::text <> '' THEN $9::integer END,
			 CASE WHEN $8::text <> '' THEN $10::bigint END, now(), now())
			ON CONFLICT (consumer, message_id) DO UPDATE SET
			 status = EXCLUDED.status, attempts = GREATEST(i.attempts, EXCLUDED.attempts),
			 last_error = EXCLUDED.last_error, locked_until = NULL, updated_at = now()
			WHERE i.status NOT IN ('COMPLETED', 'FAILED_FINAL')
			RETURNING status, attempts`),
	}
}
