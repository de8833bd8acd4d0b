package report

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Unhealthy returns the status's problems as one error, or nil.
func Unhealthy(st *relaytype.SlotStatus) error {
	if len(st.Problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(st.Problems, "; "))
}

// Source is one source in relay status --config: its status, or the
// error that kept it from being read.
type Source struct {
	Name   string                `json:"name"`
	Status *relaytype.SlotStatus `json:"status,omitempty"`
	Error  string                `json:"error,omitempty"`
}

// Sources writes the status of a fleet file's sources: as JSON under
// "sources", or as one table per source under a "source NAME" line. bad
// names each source that could not be read or is unhealthy, with why; err
// is a failed write.
func Sources(w io.Writer, asJSON bool, sources []Source) (bad []string, err error) {
	if asJSON {
		if err := JSON(w, struct {
			Sources []Source `json:"sources"`
		}{sources}); err != nil {
			return nil, err
		}
	}
	for i, r := range sources {
		if !asJSON {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "source %s\n", r.Name)
		}
		switch {
		case r.Error != "":
			bad = append(bad, r.Name+" ("+r.Error+")")
			if !asJSON {
				fmt.Fprintf(w, "error  %s\n", r.Error)
			}
		default:
			if !asJSON {
				if err := Status(w, r.Status); err != nil {
					return nil, err
				}
			}
			if err := Unhealthy(r.Status); err != nil {
				bad = append(bad, r.Name+" ("+err.Error()+")")
			}
		}
	}
	return bad, nil
}

// Status writes relay status's table: the slot, the publication, the
// slot's positions and WAL, the state row, the exactly-once progress,
// other slots, the gap and each problem, one "key  value" row each.
func Status(w io.Writer, st *relaytype.SlotStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	if st.ForeignSlot != "" {
		row("slot", st.Slot+" (not this database's: "+st.ForeignSlot+")")
	} else {
		row("slot", st.Slot+" ("+existence(st.SlotExists)+")")
	}
	row("publication", st.Publication+" ("+existence(st.PublicationExists)+")")
	row("table", st.Table)
	if st.SlotExists {
		active := "no"
		if st.Active {
			active = "yes"
			if st.ActivePID != nil {
				active += ", pid " + strconv.Itoa(int(*st.ActivePID))
			}
		}
		row("active", active)
		if st.Active {
			row("active_process", activeProcess(st))
		}
		row("confirmed_flush_lsn", st.ConfirmedFlushLSN)
		row("restart_lsn", st.RestartLSN)
		row("current_wal_lsn", st.CurrentWALLSN)
		row("lag", cliutil.ByteCount(st.LagBytes))
		row("retained_wal", cliutil.ByteCount(st.RetainedWALBytes))
		row("wal_status", st.WALStatus)
		safe := "unlimited"
		if st.SafeWALSize != nil {
			safe = cliutil.ByteCount(*st.SafeWALSize)
		}
		row("safe_wal_size", safe)
	}
	if s := st.State; s != nil {
		row("state", fmt.Sprintf("system %s, timeline %d, slot created at %s (%s), incarnation %s", s.SystemIdentifier, s.Timeline,
			s.SlotCreatedLSN, s.SlotCreatedAt.UTC().Format(time.RFC3339), cmp.Or(s.Incarnation, "none yet")))
		confirmed := s.ConfirmedLSN
		if s.ConfirmedCommitTime != nil {
			confirmed += ", committed " + s.ConfirmedCommitTime.UTC().Format(time.RFC3339)
		}
		row("state_confirmed", confirmed)
		row("state_ceiling_lsn", s.CeilingLSN)
		if s.PrunedBefore != nil {
			row("pruned_before", s.PrunedBefore.UTC().Format(time.RFC3339))
		}
	}
	if p := st.Progress; p != nil {
		switch {
		case p.Error != "":
			row("progress", "unknown ("+p.Error+")")
		case !p.Found:
			row("progress", "none committed yet (topic "+p.Topic+", key "+p.Key+")")
		default:
			v := p.CommittedLSN
			if p.CommitTime != nil {
				v += ", committed " + p.CommitTime.UTC().Format(time.RFC3339)
			}
			row("progress", v+" (topic "+p.Topic+", key "+p.Key+")")
			row("progress_trust", p.Trust)
		}
	}
	for _, o := range st.OtherSlots {
		row("other_slot", o+": it publishes every outbox row too")
	}
	if st.Gap != nil {
		row("gap", st.Gap.Reason+": "+st.Gap.Detail)
	}
	for _, p := range st.Problems {
		row("problem", p)
	}
	return tw.Flush()
}

// activeProcess describes the process streaming the slot, from
// pg_stat_replication.
func activeProcess(st *relaytype.SlotStatus) string {
	p := st.ActiveApplicationName
	if p == "" {
		p = "(no application_name)"
	}
	if st.ActiveClientAddr != "" {
		p += " from " + st.ActiveClientAddr
	} else {
		p += " over a Unix socket"
	}
	if st.ActiveState != "" {
		p += ", " + st.ActiveState
	}
	if st.ActiveBackendStart != nil {
		p += ", connected " + st.ActiveBackendStart.UTC().Format(time.RFC3339)
	}
	if st.ActiveReplyTime != nil {
		p += ", last reply " + st.ActiveReplyTime.UTC().Format(time.RFC3339)
	}
	return p
}

func existence(ok bool) string {
	if ok {
		return "exists"
	}
	return "missing"
}
