-- pgoutbox: the relay's state, one row per replication slot, in the outbox's
-- schema. It lives in the database (not in the relay) so that it reaches
-- physical standbys by ordinary replication: after a failover, a dropped or
-- lost slot, or a pg_upgrade, the relay compares it with what the server
-- says and refuses to stream over a gap (see docs/failover.md).
CREATE TABLE IF NOT EXISTS public.pgoutbox_relay_state (
    slot_name             text        PRIMARY KEY,
    -- The server the slot was created on: pg_control_system's system
    -- identifier and the timeline (IDENTIFY_SYSTEM) at that time.
    system_identifier     text        NOT NULL,
    timeline              integer     NOT NULL,
    -- The slot's consistent point and creation time.
    slot_created_lsn      pg_lsn      NOT NULL,
    slot_created_at       timestamptz NOT NULL,
    -- What Kafka acknowledged, as far as the relay last recorded it: the
    -- end LSN and the commit time of the last such transaction.
    confirmed_lsn         pg_lsn      NOT NULL,
    confirmed_commit_time timestamptz NULL,
    -- The relay never confirms past this position: a slot whose
    -- confirmed_flush_lsn is beyond it was created or moved by someone else.
    ceiling_lsn           pg_lsn      NOT NULL,
    -- The relay published pgoutbox logical messages (EmitTx), which a
    -- backfill from the table cannot recover.
    messages_seen         boolean     NOT NULL DEFAULT false,
    -- Prune's high-water mark: rows created before it may have been deleted.
    pruned_before         timestamptz NULL,
    updated_at            timestamptz NOT NULL DEFAULT now()
);
