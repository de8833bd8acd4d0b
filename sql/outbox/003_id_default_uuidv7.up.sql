-- pgoutbox: a default for outbox.id, so producers in any language can insert
-- a row with plain SQL (or from a trigger) without generating the ID.
-- Apply with: psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f sql/outbox/003_id_default_uuidv7.up.sql
--
-- pgoutbox_uuidv7() returns a time-ordered UUID version 7 (RFC 9562): 48 bits
-- of Unix time in milliseconds, then random bits, so new rows append to the
-- primary key index instead of landing at random pages. It needs PostgreSQL
-- 13+ (gen_random_uuid is built in); PostgreSQL 18 has uuidv7() built in.
-- Alternative without a function: ALTER TABLE public.outbox ALTER COLUMN id
-- SET DEFAULT gen_random_uuid(); (random version 4 IDs, equally valid as
-- message IDs).
CREATE OR REPLACE FUNCTION public.pgoutbox_uuidv7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                placing substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                FROM 1 FOR 6),
            52, 1), 53, 1),  -- version bits 0100 (v4) -> 0111 (v7); the variant stays 10
        'hex')::uuid
$$;

ALTER TABLE public.outbox ALTER COLUMN id SET DEFAULT public.pgoutbox_uuidv7();
