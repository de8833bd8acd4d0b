package admin

import (
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// healthy are the facts of a server and role that lack nothing.
func healthy() prereqFacts {
	return prereqFacts{walLevel: "logical", maxSlots: 10, usedSlots: 1, maxSenders: 10, usedSenders: 1,
		user: "relay", database: "app", replication: true, schemaExists: true, schemaCreate: true,
		tableExists: true, tableOwner: true, dbCreate: true, bookkeeping: true, pubExists: true,
		stateExists: true, stateWrite: true, tableSelect: true, tableDelete: true}
}

// check runs every check over facts, as checkPrerequisites does.
func check(f prereqFacts, plat platform, setup bool) []relaytype.Problem {
	c := &Config{Config: slotstate.Config{Slot: "pgoutbox", Publication: "pgoutbox", Table: "public.outbox"}}
	p := &prereqCheck{f: f, c: c, setup: setup, creating: true, plat: plat, user: `"relay"`}
	p.checkServer()
	p.checkSlotName()
	p.checkReplicationRole()
	p.checkCreate()
	p.checkRunRights()
	return p.problems
}

// Each unmet prerequisite is one Problem, named by its check, with the fix
// for the platform the server looks like; a healthy server has none.
func TestPrerequisiteChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		mod     func(*prereqFacts)
		plat    platform
		check   string
		fixHas  string
		problem bool
	}{
		{name: "healthy", mod: func(*prereqFacts) {}},
		{"wal_level", func(f *prereqFacts) { f.walLevel = "replica" }, selfManaged, "wal_level", "ALTER SYSTEM SET wal_level = logical", true},
		{"wal_level rds", func(f *prereqFacts) { f.walLevel = "replica" }, rds, "wal_level", "rds.logical_replication", true},
		{"wal_level cloudsql", func(f *prereqFacts) { f.walLevel = "replica" }, cloudSQL, "wal_level", "cloudsql.logical_decoding", true},
		{"wal_level azure", func(f *prereqFacts) { f.walLevel = "replica" }, azure, "wal_level", "az postgres", true},
		{"slots", func(f *prereqFacts) { f.usedSlots = 10 }, selfManaged, "replication slots", "max_replication_slots = 14", true},
		{"senders", func(f *prereqFacts) { f.usedSenders = 10 }, rds, "wal senders", "max_wal_senders = 14 in the DB parameter group", true},
		{"role", func(f *prereqFacts) { f.replication = false }, selfManaged, "replication role", `ALTER ROLE "relay" WITH REPLICATION`, true},
		{"role rds", func(f *prereqFacts) { f.replication = false }, rds, "replication role", "GRANT rds_replication", true},
		{"slot of another database", func(f *prereqFacts) { f.slotExists, f.slotPlugin, f.slotDatabase = true, "pgoutput", "other" }, selfManaged, "slot name", "--slot", true},
		{"physical slot", func(f *prereqFacts) { f.slotExists = true }, selfManaged, "slot name", "pg_drop_replication_slot", true},
		{"standby", func(f *prereqFacts) { f.inRecovery = true }, selfManaged, "primary", "target_session_attrs=read-write", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := healthy()
			tc.mod(&f)
			got := check(f, tc.plat, false)
			if !tc.problem {
				if len(got) != 0 {
					t.Fatalf("problems %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Check != tc.check || !strings.Contains(got[0].Fix, tc.fixHas) {
				t.Fatalf("problems %+v, want one %q whose fix has %q", got, tc.check, tc.fixHas)
			}
		})
	}
}

// A PrerequisitesError lists every problem with its fix on one line and
// wraps ErrPrerequisites.
func TestPrerequisitesErrorListsAll(t *testing.T) {
	t.Parallel()
	f := healthy()
	f.walLevel, f.replication = "minimal", false
	err := &relaytype.PrerequisitesError{Problems: check(f, selfManaged, false)}
	if len(err.Problems) != 2 || !strings.Contains(err.Error(), "(1) wal_level is minimal") || !strings.Contains(err.Error(), "(2) role relay") {
		t.Errorf("%v", err)
	}
}
