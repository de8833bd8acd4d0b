-- pgoutbox: what a two-phase attempt left for the next one (reconciliation).
-- Apply after 003: psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f sql/inbox/004_attempt_reconciliation.up.sql
--
-- An external API without idempotency keys cannot be called again blindly
-- after a crash or a timeout: the next attempt must first ask the provider
-- what happened. attempt_started_at is when the latest two-phase attempt
-- claimed the message; request_ref is the reference that attempt saved
-- (inbox.SaveRequestRef) before calling out. The next attempt's handler reads
-- both (inbox.AttemptFromContext). Adding nullable columns without a default
-- only touches the catalog.
ALTER TABLE public.inbox ADD COLUMN IF NOT EXISTS attempt_started_at timestamptz NULL;
ALTER TABLE public.inbox ADD COLUMN IF NOT EXISTS request_ref text NULL;
