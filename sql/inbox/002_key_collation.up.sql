-- pgoutbox: compare the inbox keys byte by byte (COLLATE "C").
-- Apply after 001: psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f sql/inbox/002_key_collation.up.sql
--
-- consumer, message_id and business_key are opaque identifiers that the
-- inbox only compares for equality. Under a linguistic collation (en_US.UTF-8
-- is the default of most installations and of the postgres Docker image)
-- every comparison in the two unique indexes calls strcoll, which made the
-- claim of a 100-message batch about 1.4 times as expensive as with "C".
-- A deterministic collation treats only identical strings as equal, so for
-- those equality means the same under "C" and no row changes meaning;
-- sorting by these columns becomes byte order. Columns with a
-- nondeterministic collation (say, a case-insensitive one chosen on
-- purpose) are left alone, as are columns that already compare bytes ("C",
-- "POSIX", or the default collation of a C or POSIX database).
--
-- On an existing table the change rebuilds the two unique indexes while
-- holding an ACCESS EXCLUSIVE lock on the table: on a large inbox, apply it
-- at a quiet moment, with a lock_timeout when you run it by hand. A view or
-- rule on these columns makes it fail; drop and recreate it around the
-- migration.
DO $inbox_002$
DECLARE
    clauses text;
BEGIN
    SELECT string_agg(format('ALTER COLUMN %I TYPE text COLLATE "C"', a.attname), ', ')
    INTO clauses
    FROM pg_attribute a
    JOIN pg_collation c ON c.oid = a.attcollation
    WHERE a.attrelid = 'public.inbox'::regclass
      AND a.attname IN ('consumer', 'message_id', 'business_key')
      AND c.collisdeterministic
      AND c.collname NOT IN ('C', 'POSIX')
      AND NOT (c.collname = 'default' AND EXISTS (
          SELECT 1 FROM pg_database
          WHERE datname = current_database() AND datlocprovider = 'c' AND datcollate IN ('C', 'POSIX')));
    IF clauses IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %s ', 'public.inbox'::regclass) || clauses;
    END IF;
END
$inbox_002$;
