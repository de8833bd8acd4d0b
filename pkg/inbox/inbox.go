package inbox

import (
	"fmt"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loophook"
)

// Inbox deduplicates messages of one consumer on the database of its
// Driver; TTx is the driver's transaction type (pgx.Tx or *sql.Tx). It is
// safe for concurrent use.
type Inbox[TTx any] struct {
	*core
	loopHook // the consumer loop's way in (loop.go)
	driver   *Driver[TTx]
}

// core is what an Inbox does whatever its driver: the claim, the state
// machine, the leases, the two-phase path, metrics and logs. Only the
// handler of the transactional path sees TTx (Inbox.runTx).
type core struct {
	cfg     Config
	table   string // sanitized
	queries queries
	metrics *metrics
	log     *slog.Logger
	db      dbdriver.DB
	admin   dbdriver.Querier // single statements; nil when db only begins transactions
}

// New validates driver and cfg and returns an Inbox on driver's database:
//
//	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: "billing"})
//
// It registers the metrics on cfg.Registerer; a second Inbox on the same
// Registerer must use another Consumer name or registration fails.
func New[TTx any](driver *Driver[TTx], cfg *Config) (*Inbox[TTx], error) {
	if err := driver.check(); err != nil {
		return nil, err
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t, err := pgname.Parse(c.Table, "public")
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	m := newMetrics()
	if err := m.register(c.Registerer, c.Consumer); err != nil {
		return nil, err
	}
	in := &Inbox[TTx]{
		core: &core{
			cfg:     c,
			table:   t.Sanitize(),
			queries: newQueries(t.Sanitize()),
			metrics: m,
			log:     c.Logger.With("consumer", c.Consumer),
			db:      driver.h.DB,
			admin:   driver.h.DB.Autocommit(),
		},
		driver: driver,
	}
	in.loopHook = loophook.New(in.loopInternals)
	return in, nil
}

// Consumer returns the consumer name.
func (in *Inbox[TTx]) Consumer() string { return in.cfg.Consumer }
