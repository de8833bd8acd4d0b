package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Verdict says in one line what is wrong with a verify report: "ok",
// "empty (...)" for a window without outbox rows, or the counts of
// missing rows, mismatched records and order breaks.
func Verdict(r *relaytype.VerifyReport) string {
	var parts []string
	for _, p := range []struct {
		n    int64
		what string
	}{{r.Missing, "rows missing"}, {r.Mismatched, "records mismatched"}, {r.OrderBreaks, "order breaks"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	switch {
	case len(parts) == 0 && r.Rows == 0:
		return "empty (no outbox rows in the window)"
	case len(parts) == 0:
		return "ok"
	}
	return strings.Join(parts, ", ")
}

// VerifyJSON writes a verify report as JSON: indented for a single relay
// (source empty), or on one line as {"source": ..., "report": ...} for a
// source of a fleet file, so the reports of a fleet are one per line.
func VerifyJSON(w io.Writer, source string, r *relaytype.VerifyReport) error {
	if source != "" {
		return json.NewEncoder(w).Encode(struct {
			Source string                  `json:"source"`
			Report *relaytype.VerifyReport `json:"report"`
		}{source, r})
	}
	return JSON(w, r)
}

// JSON writes v as indented JSON, as relay status --json and relay verify
// --json print a single result.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Verify writes a verify report as text: a "source NAME" line first for a
// source of a fleet file (source not empty), then the window of table,
// the counts, the rows and records it names, and the verdict.
func Verify(w io.Writer, source, table string, r *relaytype.VerifyReport) {
	if source != "" {
		fmt.Fprintf(w, "source %s\n", source)
	}
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	off := func(o relaytype.VerifyOffset) string { return fmt.Sprintf("%s[%d]@%d", o.Topic, o.Partition, o.Offset) }
	fmt.Fprintf(w, "window:        %s .. %s (%s)\n", ts(r.From), ts(r.To), table)
	fmt.Fprintf(w, "rows:          %d\n", r.Rows)
	fmt.Fprintf(w, "found:         %d\n", r.Found)
	fmt.Fprintf(w, "dead-lettered: %d\n", r.DeadLettered)
	fmt.Fprintf(w, "missing:       %d\n", r.Missing)
	fmt.Fprintf(w, "pending:       %d\n", r.Pending)
	fmt.Fprintf(w, "duplicates:    %d records of %d rows\n", r.Duplicates, r.DuplicatedRows)
	fmt.Fprintf(w, "mismatched:    %d records\n", r.Mismatched)
	fmt.Fprintf(w, "order breaks:  %d\n", r.OrderBreaks)
	fmt.Fprintf(w, "records read:  %d (no row in the window: %d, no message ID: %d)\n", r.RecordsRead, r.Unmatched, r.RecordsWithoutID)
	if r.InvalidIDs > 0 {
		fmt.Fprintf(w, "invalid ids:   %d rows whose id is not a UUID (not verifiable)\n", r.InvalidIDs)
	}
	if r.PrunedBefore != nil {
		fmt.Fprintf(w, "pruned:        rows created before %s may have been deleted by pruning; %d records of that range match no row (unverifiable)\n",
			ts(*r.PrunedBefore), r.Unverifiable)
	}
	if r.MissingTopicCount > 0 {
		more := ""
		if n := r.MissingTopicCount - len(r.MissingTopics); n > 0 {
			more = fmt.Sprintf(" (and %d more, %d in all; --list names more)", n, r.MissingTopicCount)
		}
		fmt.Fprintf(w, "missing topics: %s%s\n", strings.Join(r.MissingTopics, ", "), more)
	}
	if len(r.UnreadableTopics) > 0 {
		fmt.Fprintf(w, "unreadable topics (their rows are not verified; --allowed-topics routes rows as the relay does):\n")
		for _, u := range r.UnreadableTopics {
			fmt.Fprintf(w, "  %s: %s\n", u.Topic, u.Error)
		}
		fmt.Fprintf(w, "unverified:    %d rows routed to them\n", r.UnreadableRows)
	}
	if len(r.MissingRows) > 0 {
		fmt.Fprintf(w, "missing rows (first %d by created_at):\n", len(r.MissingRows))
		for _, m := range r.MissingRows {
			commit := "unknown (track_commit_timestamp off)"
			if m.CommitTime != nil {
				commit = ts(*m.CommitTime)
			}
			fmt.Fprintf(w, "  %s  topic %s  created %s  committed %s\n", m.ID, m.Topic, ts(m.CreatedAt), commit)
		}
	}
	if len(r.DuplicateRows) > 0 {
		fmt.Fprintf(w, "duplicated rows (first %d):\n", len(r.DuplicateRows))
		for _, d := range r.DuplicateRows {
			var at []string
			for _, o := range d.Offsets {
				at = append(at, off(o))
			}
			fmt.Fprintf(w, "  %s  %d records: %s\n", d.ID, d.Records, strings.Join(at, " "))
		}
	}
	if len(r.MismatchRecords) > 0 {
		fmt.Fprintf(w, "mismatched records (first %d):\n", len(r.MismatchRecords))
		for _, m := range r.MismatchRecords {
			fmt.Fprintf(w, "  %s  %s  %s: row %q, record %q\n", m.ID, off(m.Offset), m.Field, m.Want, m.Got)
		}
	}
	if len(r.OrderBreakList) > 0 {
		fmt.Fprintf(w, "order breaks (first %d):\n", len(r.OrderBreakList))
		for _, o := range r.OrderBreakList {
			fmt.Fprintf(w, "  aggregate %q: %s at %s committed %s, after %s at offset %d committed %s\n",
				o.AggregateID, o.ID, off(o.At), ts(o.CommitTime), o.AfterID, o.AfterOffset, ts(o.AfterCommit))
		}
	}
	fmt.Fprintf(w, "verdict:       %s\n", Verdict(r))
}
