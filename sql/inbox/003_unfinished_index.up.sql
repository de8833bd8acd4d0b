-- pgoutbox: an index over the rows that are not COMPLETED, for the periodic stats.
-- Apply after 002: psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f sql/inbox/003_unfinished_index.up.sql
--
-- The consumer loop refreshes its gauges (rows per unfinished status, stuck
-- leases, the oldest unfinished message) every StatsInterval. With days of
-- retention nearly every row is COMPLETED; this partial index holds only the
-- others (usually a handful), so the stats query reads a few index pages
-- instead of every row of the consumer. The transactional path inserts rows
-- COMPLETED, so they never enter it.
--
-- On an existing large table CREATE INDEX blocks writes while it scans the
-- table. To avoid that, create the index by hand first with
--   CREATE INDEX CONCURRENTLY inbox_unfinished_idx ON public.inbox
--       (consumer, status, received_at) WHERE status <> 'COMPLETED';
-- and this migration then finds it in place.
CREATE INDEX IF NOT EXISTS inbox_unfinished_idx
    ON public.inbox (consumer, status, received_at) WHERE status <> 'COMPLETED';
