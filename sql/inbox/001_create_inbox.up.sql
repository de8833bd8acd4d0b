-- pgoutbox: the consumer-side inbox table (deduplication and state machine).
-- Apply with: psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f sql/inbox/001_create_inbox.up.sql
-- One row per (consumer, message); a consumer is one logical subscriber
-- (usually a service name), so several services can share one table.
CREATE TABLE IF NOT EXISTS public.inbox (
    consumer     text        NOT NULL,
    message_id   text        NOT NULL,
    business_key text        NOT NULL,
    -- sha256 of the payload: a redelivery with the same key but other bytes
    -- is a conflict, not a duplicate.
    payload_hash bytea       NOT NULL,
    status       text        NOT NULL DEFAULT 'RECEIVED',
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text        NULL,
    result_ref   text        NULL,
    -- lease of the two-phase path: a PROCESSING row whose lease expired may
    -- be taken over by a later delivery.
    locked_until timestamptz NULL,
    topic        text        NULL,
    "partition"  integer     NULL,
    "offset"     bigint      NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz NULL,
    -- set once the consumer loop wrote the FAILED_FINAL message to the
    -- dead-letter topic, so a redelivery does not write it again.
    dead_lettered_at timestamptz NULL,
    CONSTRAINT inbox_pkey PRIMARY KEY (consumer, message_id),
    CONSTRAINT inbox_business_key_key UNIQUE (consumer, business_key),
    CONSTRAINT inbox_status_check CHECK (status IN
        ('RECEIVED', 'PROCESSING', 'COMPLETED', 'FAILED_RETRYABLE', 'FAILED_FINAL')),
    CONSTRAINT inbox_attempts_check CHECK (attempts >= 0)
);

-- Retention deletes COMPLETED rows by age in small batches. completed_at
-- grows with insertion order, so a BRIN index serves the range scan at a
-- fraction of a btree's cost on every claim.
CREATE INDEX IF NOT EXISTS inbox_completed_at_idx
    ON public.inbox USING brin (completed_at);

-- Stuck-lease reports scan only PROCESSING rows.
CREATE INDEX IF NOT EXISTS inbox_processing_locked_until_idx
    ON public.inbox (locked_until) WHERE status = 'PROCESSING';
