package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/liveness"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/relayconfig"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/verify"
)

// VerifyOptions selects the window Verify audits and bounds its resources.
type VerifyOptions struct {
	// From and To bound the window: outbox rows created at or after From
	// and before To. Required.
	From, To time.Time
	// Margin is how far before From the topics are read by record
	// timestamp. Defaults to 1m.
	Margin time.Duration
	// Grace: a row created less than this before Verify started and not
	// yet in Kafka is pending, not missing. Defaults to 1m.
	Grace time.Duration
	// List is how many missing rows, duplicates, mismatches and order
	// breaks the report names (each). Defaults to 20; negative for none.
	List int
	// MaxInMemory bounds the entries (rows, records, first deliveries)
	// each of Verify's three sorts keeps in memory; beyond it they spill
	// to sorted files in SpillDir. Defaults to 200,000.
	MaxInMemory int
	// SpillDir holds the spill files, removed before Verify returns.
	// Defaults to os.TempDir().
	SpillDir string
}

// VerifyReport is what Verify found: counts over the window and the first
// few of each problem. OK says whether every row was accounted for.
type VerifyReport = verify.Report

// Verify audits the outbox against Kafka: it reads the outbox rows created
// in the window, reads the topics they route to (as the relay routes them)
// and the dead-letter topic, read_committed, from the offsets whose
// timestamps cover the window, and matches records to rows by message ID.
// It reports rows found, dead-lettered, missing and pending, duplicate
// records, records whose key, business-key header or topic disagree with
// their row, and order breaks among each aggregate's first deliveries.
//
// Rows deleted from the table cannot be checked: when the relay state
// records pruning past the window's start, the report says from when on
// rows may be missing from the table (PrunedBefore) and counts the records
// of that range matching no row as unverifiable. Memory is bounded by
// opts.MaxInMemory; see internal/verify for the method and its limits.
// It needs cfg's database, table, topic template, dead-letter topic and
// Kafka settings; it writes nothing.
func Verify(ctx context.Context, cfg *Config, opts VerifyOptions) (*VerifyReport, error) {
	c, err := relayconfig.WithDefaults(cfg.engine())
	if err != nil {
		return nil, err
	}
	if err := relayconfig.NeedBrokers(&c); err != nil {
		return nil, err
	}
	if opts.From.IsZero() || opts.To.IsZero() || !opts.To.After(opts.From) {
		return nil, fmt.Errorf("%w: verify needs a window whose end is after its start", relayerr.ErrConfig)
	}
	conn, err := liveness.Connect(ctx, &c)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var prunedBefore *time.Time
	st, err := slotstate.ReadState(ctx, conn, &c)
	switch {
	case errors.Is(err, relayerr.ErrStateMissing): // no state table: no prune mark either
	case err != nil:
		return nil, err
	case st != nil:
		prunedBefore = st.PrunedBefore
	}
	table, _ := pgname.Parse(c.Table, "public")
	kopts := producer.ClientOpts(producer.Config{Brokers: c.Brokers, TLS: c.TLS, SASL: (*producer.SASL)(c.SASL)})
	dec := decode.NewDecoder(&c, nil)
	rep, err := verify.Run(ctx, &verify.Config{
		Conn:            conn,
		Table:           table,
		Format:          c.TableFormat,
		Route:           dec.Route,
		DeadLetterTopic: c.DeadLetterTopic,
		Kafka:           kopts,
		From:            opts.From,
		To:              opts.To,
		PrunedBefore:    prunedBefore,
		Margin:          opts.Margin,
		Grace:           opts.Grace,
		List:            opts.List,
		MaxInMemory:     opts.MaxInMemory,
		SpillDir:        opts.SpillDir,
		Logger:          c.Logger,
	})
	if errors.Is(err, verify.ErrUsage) {
		return nil, fmt.Errorf("%w: %w", relayerr.ErrConfig, err)
	}
	return rep, err
}
