package slotstate

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// PeerSlot is another replication slot of the database that may relay the
// same outbox: one with a row in the outbox's relay state table, or a
// pgoutput slot whose walsender streams the relay's publication.
type PeerSlot struct {
	// Slot is the slot's name.
	Slot string
	// Exists is false for a state row whose slot is gone (a gap).
	Exists bool
	// ActivePID is the walsender streaming it; nil when none does.
	ActivePID *int32
	// Publications are those its walsender asked for (START_REPLICATION's
	// publication_names); nil when it is not streaming or the role may not
	// read the walsender's command (pg_read_all_stats).
	Publications []string
	// RelaysTable is true when the slot has a row in the outbox's relay
	// state table: a relay of this outbox uses it.
	RelaysTable bool
}

// Uses reports whether the peer streams, or may stream, the publication
// pub: its walsender names pub, or it is a relay slot of this outbox whose
// publication cannot be seen (not streaming now), which is configured for
// the outbox's publication as far as anyone can tell.
func (p PeerSlot) Uses(pub string) bool {
	if p.Publications != nil {
		return slices.Contains(p.Publications, pub)
	}
	return p.RelaysTable
}

// String describes the peer in a few words, for errors and status.
func (p PeerSlot) String() string {
	var parts []string
	switch {
	case !p.Exists:
		parts = append(parts, "slot missing, state row kept")
	case p.ActivePID != nil:
		parts = append(parts, "streaming, pid "+strconv.Itoa(int(*p.ActivePID)))
	default:
		parts = append(parts, "not streaming")
	}
	if p.Publications != nil {
		parts = append(parts, "publication "+strings.Join(p.Publications, ","))
	}
	if p.RelaysTable {
		parts = append(parts, "a relay slot of this outbox")
	}
	return p.Slot + " (" + strings.Join(parts, "; ") + ")"
}

// PeerSlots lists the slots other than c.Slot that relay c's outbox (a row
// in its state table) or stream c.Publication (pgoutput slots of this
// database whose walsender names it), ordered by name.
func PeerSlots(ctx context.Context, conn *pgx.Conn, c *Config) ([]PeerSlot, error) {
	var hasState bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, StateTable(c).Sanitize()).Scan(&hasState); err != nil {
		return nil, fmt.Errorf("relay: look up %s: %w", StateTable(c), err)
	}
	stateRows := `SELECT NULL::text AS slot_name WHERE false`
	if hasState {
		stateRows = `SELECT slot_name FROM ` + StateTable(c).Sanitize()
	}
	rows, err := conn.Query(ctx, `
		WITH st AS (`+stateRows+`),
		     sl AS (SELECT slot_name, active_pid FROM pg_replication_slots
		             WHERE slot_type = 'logical' AND plugin = 'pgoutput' AND database = current_database())
		SELECT coalesce(sl.slot_name, st.slot_name), sl.slot_name IS NOT NULL, sl.active_pid, a.query, st.slot_name IS NOT NULL
		  FROM sl FULL JOIN st ON st.slot_name = sl.slot_name
		  LEFT JOIN pg_stat_activity a ON a.pid = sl.active_pid
		 WHERE coalesce(sl.slot_name, st.slot_name) <> $1
		 ORDER BY 1`, c.Slot)
	if err != nil {
		return nil, fmt.Errorf("relay: list the other replication slots: %w", err)
	}
	var peers []PeerSlot
	for rows.Next() {
		var p PeerSlot
		var query *string
		if err := rows.Scan(&p.Slot, &p.Exists, &p.ActivePID, &query, &p.RelaysTable); err != nil {
			return nil, fmt.Errorf("relay: list the other replication slots: %w", err)
		}
		if p.ActivePID != nil && query != nil {
			p.Publications = publicationNames(*query)
		}
		if p.RelaysTable || slices.Contains(p.Publications, c.Publication) {
			peers = append(peers, p)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("relay: list the other replication slots: %w", err)
	}
	return peers, nil
}

// publicationNamesArg finds the publication_names option of a walsender's
// START_REPLICATION command, as pg_stat_activity.query shows it.
var publicationNamesArg = regexp.MustCompile(`(?i)publication_names\s+'((?:[^']|'')*)'`)

// publicationNames returns the publications a START_REPLICATION command
// asks for; nil when query is not one (or is hidden from this role).
func publicationNames(query string) []string {
	m := publicationNamesArg.FindStringSubmatch(query)
	if m == nil {
		return nil
	}
	list := strings.ReplaceAll(m[1], `''`, `'`)
	names := []string{}
	for _, n := range splitNames(list) {
		if n != "" {
			names = append(names, n)
		}
	}
	return names
}

// splitNames splits a comma-separated list of identifiers, each possibly
// double-quoted (with "" for a quote), as pgoutput parses
// publication_names; unquoted names fold to lower case.
func splitNames(list string) []string {
	var names []string
	var b strings.Builder
	quoted, inQuotes := false, false
	flush := func() {
		n := strings.TrimSpace(b.String())
		if !quoted {
			n = strings.ToLower(n)
		}
		names = append(names, n)
		b.Reset()
		quoted = false
	}
	for i := 0; i < len(list); i++ {
		ch := list[i]
		switch {
		case inQuotes && ch == '"' && i+1 < len(list) && list[i+1] == '"':
			b.WriteByte('"')
			i++
		case ch == '"':
			inQuotes, quoted = !inQuotes, true
		case ch == ',' && !inQuotes:
			flush()
		default:
			b.WriteByte(ch)
		}
	}
	flush()
	return names
}

// PeerNames joins the peers' descriptions, for messages.
func PeerNames(peers []PeerSlot) string {
	s := make([]string, len(peers))
	for i, p := range peers {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
