package faults

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// table sums the runs' results per fault kind and transaction version.
type table struct {
	mu   sync.Mutex
	rows []*tableRow
}

type tableRow struct {
	kind     string
	tv       int16
	runs     int
	failed   int
	faults   int
	restarts int
	result
}

func newTable() *table { return &table{} }

func (tb *table) add(kind string, tv int16, faults, restarts int, res result, failed bool) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var row *tableRow
	for _, r := range tb.rows {
		if r.kind == kind && r.tv == tv {
			row = r
		}
	}
	if row == nil {
		row = &tableRow{kind: kind, tv: tv}
		tb.rows = append(tb.rows, row)
	}
	row.runs++
	row.faults += faults
	row.restarts += restarts
	if failed {
		row.failed++
	}
	row.committed += res.committed
	row.lost += res.lost
	row.duplicated += res.duplicated
	row.abortedReads += res.abortedReads
	row.abortedInKafka += res.abortedInKafka
	row.torn += res.torn
	row.orderBreaks += res.orderBreaks
	row.stale += res.stale
	row.openTxns += res.openTxns
	row.epochs += res.epochs
}

// markdown is the table in Markdown.
func (tb *table) markdown() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var b strings.Builder
	b.WriteString("| fault | TV | runs | faults | rows committed | lost | duplicated | aborted reads | torn | order breaks | stale records | open txns | aborted Kafka records (read_uncommitted) | producer epochs | relay restarts | failed runs |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range tb.rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n",
			r.kind, r.tv, r.runs, r.faults, r.committed, r.lost, r.duplicated, r.abortedReads, r.torn, r.orderBreaks, r.stale,
			r.openTxns, r.abortedInKafka, r.epochs, r.restarts, r.failed)
	}
	return b.String()
}

// report logs the table and writes it to $PGOUTBOX_FAULTS_TABLE.
func (tb *table) report(t *testing.T) {
	md := tb.markdown()
	t.Logf("fault suite results:\n%s", md)
	if path := os.Getenv(tableEnv); path != "" {
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Errorf("write %s: %v", path, err)
		}
	}
}
