// Package pgserver starts a throwaway PostgreSQL server for tests and for
// `relay dev`: initdb in a temporary directory, wal_level=logical, a free
// loopback port, settings for speed over durability. It needs the server
// binaries (initdb, postgres) on PATH or under /usr/lib/postgresql/*/bin,
// or in a directory given to StartIn (another version's). A standby is a
// pg_basebackup of the primary, or, where no pg_basebackup of the server's
// version is at hand, a copy of its data directory between pg_backup_start
// and pg_backup_stop.
// As root it runs them as the postgres OS user, since initdb refuses root.
// The server dies with the process that started it (Pdeathsig), and Stop
// removes its directory.
package pgserver
