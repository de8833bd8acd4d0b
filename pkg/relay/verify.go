package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/verify"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

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
func Verify(ctx context.Context, cfg *Config, opts relaytype.VerifyOptions) (*relaytype.VerifyReport, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	if err := c.CheckBrokers(); err != nil {
		return nil, err
	}
	if opts.From.IsZero() || opts.To.IsZero() || !opts.To.After(opts.From) {
		return nil, fmt.Errorf("%w: verify needs a window whose end is after its start", relaytype.ErrConfig)
	}
	conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var prunedBefore *time.Time
	st, err := slotstate.ReadState(ctx, conn, slotConfig(&c))
	switch {
	case errors.Is(err, relaytype.ErrStateMissing): // no state table: no prune mark either
	case err != nil:
		return nil, err
	case st != nil:
		prunedBefore = st.PrunedBefore
	}
	table, _ := pgname.Parse(c.Table, "public")
	rd, err := sinkReader(&c)
	if err != nil {
		return nil, err
	}
	dec := decode.NewDecoder(decodeConfig(&c), nil)
	rep, err := verify.Run(ctx, &verify.Config{
		VerifyOptions:   opts,
		Conn:            conn,
		Table:           table,
		Format:          c.TableFormat,
		Route:           dec.Route,
		DeadLetterTopic: c.DeadLetterTopic,
		Reader:          rd,
		PrunedBefore:    prunedBefore,
		Logger:          c.Logger,
	})
	if errors.Is(err, verify.ErrUsage) {
		return nil, fmt.Errorf("%w: %w", relaytype.ErrConfig, err)
	}
	return (*relaytype.VerifyReport)(rep), err
}

// sinkReader is the read side of c's sink: what its topics hold.
func sinkReader(c *Config) (publish.Reader, error) {
	pc, err := kafkaConn(c)
	if err != nil {
		return nil, err
	}
	p, err := publish.New(c.Sink, publish.Config{Slot: c.Slot, Settings: sinkConfig(c, pc, nil).Settings, Logger: c.Logger})
	if err != nil {
		return nil, err
	}
	rd, ok := p.(publish.Reader)
	if !ok {
		return nil, fmt.Errorf("%w: the %s sink cannot read back what it holds", relaytype.ErrConfig, c.Sink)
	}
	return rd, nil
}

// VerifyMetrics is a prometheus.Collector of the pgoutbox_verify_* gauges,
// describing the last run Set was given: what a cron job writes to a
// node_exporter textfile or pushes to a Pushgateway, or what `relay verify
// --every` serves. Every gauge is labelled with the outbox table.
type VerifyMetrics struct{ m *verify.Metrics }

// NewVerifyMetrics returns the collector for table's runs; with
// allowEmpty, a run over a window without rows is ok (by default
// pgoutbox_verify_ok is 0 for it: an audit that checked nothing).
func NewVerifyMetrics(table string, allowEmpty bool) *VerifyMetrics {
	m := verify.NewMetrics(table)
	m.AllowEmpty = allowEmpty
	return &VerifyMetrics{m: m}
}

// Set records the outcome of a run: its report, or the error that stopped
// it before a verdict.
func (v *VerifyMetrics) Set(rep *relaytype.VerifyReport, err error) { v.m.Set(rep, err) }

// Describe is prometheus.Collector's.
func (v *VerifyMetrics) Describe(ch chan<- *prometheus.Desc) { v.m.Describe(ch) }

// Collect is prometheus.Collector's.
func (v *VerifyMetrics) Collect(ch chan<- prometheus.Metric) { v.m.Collect(ch) }

// Unlabelled is v without the table label on its gauges, for a push that
// groups by table (a Pushgateway refuses a pushed series that carries a
// grouping label itself).
func (v *VerifyMetrics) Unlabelled() prometheus.Collector { return v.m.Unlabelled() }

// PingBrokers checks that cfg.Kafka.Brokers answer, with its TLS and SASL: a
// metadata request on a client of its own, within ctx.
func PingBrokers(ctx context.Context, cfg *Config) error {
	pc, err := kafkaConn(cfg)
	if err != nil {
		return err
	}
	return producer.Ping(ctx, pc)
}
