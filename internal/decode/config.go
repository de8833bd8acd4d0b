package decode

import (
	"log/slog"

	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Config is what the decoder takes of relay.Config (whose fields document
// each). The zero value of a field is not defaulted here: package relay derives it
// from a configuration with its defaults.
type Config struct {
	// Table is "schema.table", the outbox table.
	Table string
	// TableFormat is the outbox table's column layout.
	TableFormat relaytype.TableFormat
	// TopicTemplate names the topic of a row without a topic.
	TopicTemplate string
	// DeadLetterTopic, ProgressTopic and AllowedTopics bound the topics a
	// row may name (see topicProblem).
	DeadLetterTopic string
	ProgressTopic   string
	AllowedTopics   []string
	// RelayTables are the relay's own tables (migrate.RelayTables): rows a
	// publication of all tables sends of them are skipped, never
	// dead-lettered as not-outbox.
	RelayTables []pgname.Table
	// ReservedTopic, when set, reports the topics the relays of a fleet
	// write (the other sources' dead-letter and progress topics).
	ReservedTopic func(topic string) bool
	// MaxMessageBytes is the largest record.
	MaxMessageBytes int
	// StopOnInvalid makes an unusable table layout an error
	// (ErrTableColumns) rather than a layout whose rows are invalid
	// (OnInvalid is InvalidStop).
	StopOnInvalid bool
	// CloudEvents adds the CloudEvents headers, with CloudEventsSource.
	CloudEvents       bool
	CloudEventsSource string
	// Logger receives the decoder's warnings.
	Logger *slog.Logger
}
