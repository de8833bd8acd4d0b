package inboxcli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// envName is a flag's INBOX_* environment variable: --kafka-tls reads
// INBOX_KAFKA_TLS.
func envName(flag string) string {
	return "INBOX_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func tailCommand() *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name: "tail",
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "brokers", EnvVars: []string{"INBOX_BROKERS"},
				Usage: "Kafka bootstrap brokers, host:port (repeat or comma-separate)"},
			&cli.StringSliceFlag{Name: "topics", EnvVars: []string{"INBOX_TOPICS"},
				Usage: "topics to consume (repeat or comma-separate)"},
			stringFlag("group", "inbox-tail", "Kafka consumer group"),
			stringFlag("consumer", "inbox-tail", "inbox consumer name the messages are recorded under"),
			stringFlag("dlq-topic", inbox.DefaultDeadLetterTopic, "dead-letter topic"),
			stringFlag("conflict-policy", "dead-letter", "what a conflicting message becomes: stop (the loop stops with an error) or dead-letter"),
			boolFlag("force", "record under a --consumer that already has rows (its real messages would be marked COMPLETED)"),
			boolFlag("from-end", "a new group starts at the end of the topics instead of the beginning"),
			stringFlag("isolation", string(inboxkafka.ReadCommitted), "read_committed (records of aborted or open Kafka transactions are never handled) or read_uncommitted"),
			&cli.GenericFlag{Name: "max-queue-bytes", EnvVars: []string{"INBOX_MAX_QUEUE_BYTES"}, Value: cliutil.NewSize(inboxkafka.DefaultMaxQueueBytes),
				Usage: "most bytes of fetched records (key, value, headers) held, queued or being handled; fetching pauses at the bound"},
		}, kafkaflags.Flags(envName, "")...),
		Action: tailAction,
	})
}

// tailAction consumes the topics through the inbox with a handler that does
// nothing, printing each outcome.
func tailAction(c *cli.Context) error {
	if len(c.StringSlice("brokers")) == 0 || len(c.StringSlice("topics")) == 0 {
		return usagef("tail: --brokers and --topics are required")
	}
	policy := inbox.ConflictPolicy(c.String("conflict-policy"))
	if policy != inbox.ConflictPolicyStop && policy != inbox.ConflictPolicyDeadLetter {
		return usagef("--conflict-policy %q: want stop or dead-letter", c.String("conflict-policy"))
	}
	iso := inboxkafka.Isolation(c.String("isolation"))
	if iso != inboxkafka.ReadCommitted && iso != inboxkafka.ReadUncommitted {
		return usagef("--isolation %q: want %s or %s", c.String("isolation"), inboxkafka.ReadCommitted, inboxkafka.ReadUncommitted)
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	sec, err := kafkaflags.Read(c, envName)
	if err != nil {
		return err
	}
	if sec.PasswordOnCommandLine {
		cliutil.WarnSecretFlag(log, kafkaflags.FlagSASLPassword, envName(kafkaflags.FlagSASLPassword))
	}
	pool, err := connect(c)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := refuseRealConsumer(c, inbox.Pgx(pool)); err != nil {
		return err
	}
	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: c.String("consumer"), Table: c.String("table"),
		ConflictPolicy: policy, Logger: log})
	if err != nil {
		return usageError{Err: err}
	}
	cons, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
		Brokers:         c.StringSlice("brokers"),
		GroupID:         c.String("group"),
		Topics:          c.StringSlice("topics"),
		Inbox:           in,
		DeadLetterTopic: c.String("dlq-topic"),
		StartAtEnd:      c.Bool("from-end"),
		Isolation:       iso,
		MaxQueueBytes:   cliutil.SizeFlagValue(c, "max-queue-bytes"),
		TLS:             sec.TLS,
		SASL:            sec.SASL,
		Handler: func(context.Context, pgx.Tx, inbox.Message) (string, error) {
			return "", nil
		},
		OnResult: printOutcome(c.App.Writer),
	})
	if err != nil {
		return usageError{Err: err}
	}
	return cons.Run(c.Context)
}

// printOutcome returns an OnResult that prints one line per delivery to w:
// topic/partition@offset, message ID, business key, outcome and reason. The
// message ID and business key come from the record: they are quoted when
// they hold anything but printable characters (cliutil.Quote).
func printOutcome(w io.Writer) func(inbox.Message, inbox.Result) {
	var mu sync.Mutex
	return func(msg inbox.Message, res inbox.Result) {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("%s/%d@%d %s %s %s", msg.Topic, msg.Partition, msg.Offset,
			orDash(msg.ID), orDash(msg.BusinessKey), res.Outcome)
		if res.Reason != "" {
			line += " reason=" + res.Reason
		}
		fmt.Fprintln(w, line)
	}
}

// refuseRealConsumer refuses a --consumer that already has rows unless
// --force: tail's no-op handler would mark that consumer's real messages
// COMPLETED, and their effects would then be skipped as duplicates. Names
// starting with inbox-tail (the default) are tail's own.
func refuseRealConsumer(c *cli.Context, driver *inbox.Driver[pgx.Tx]) error {
	name := c.String("consumer")
	if c.Bool("force") || strings.HasPrefix(name, "inbox-tail") {
		return nil
	}
	store, err := inbox.NewStore(driver, c.String("table"))
	if err != nil {
		return usageError{Err: err}
	}
	has, err := store.HasRows(c.Context, name)
	if err != nil {
		return err
	}
	if has {
		return usagef("tail: consumer %q already has rows in %s; tail would mark its messages COMPLETED "+
			"(their effects then skipped as duplicates). Use a name of its own, or --force", name, c.String("table"))
	}
	return nil
}

// orDash quotes s for the terminal, or gives "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return cliutil.Quote(s)
}
