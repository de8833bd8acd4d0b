-- pgoutbox: each slot's incarnation, a random identity made with the slot
-- (setup, a first start, a recovery) and part of the exactly-once progress
-- key and transactional ID, so that two databases sharing a system
-- identifier and a slot name (a clone, a restored snapshot) never share
-- progress or fencing. NULL in rows written before it: the relay gives them
-- one at its next start (see docs/semantics.md).
ALTER TABLE public.pgoutbox_relay_state ADD COLUMN IF NOT EXISTS incarnation text NULL;
