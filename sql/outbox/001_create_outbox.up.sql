-- pgoutbox: the transactional outbox table.
-- Apply with: psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f sql/outbox/001_create_outbox.up.sql
-- The relay reads inserts from the WAL, not from this table, so published rows
-- may be deleted at any time (see the relay's --prune-after option).
CREATE TABLE IF NOT EXISTS public.outbox (
    id             uuid        PRIMARY KEY,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_type     text        NOT NULL,
    business_key   text        NOT NULL,
    payload        jsonb       NOT NULL,
    headers        jsonb       NULL,
    topic          text        NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Pruning deletes by age; this index keeps it cheap.
CREATE INDEX IF NOT EXISTS outbox_created_at_idx ON public.outbox (created_at);
