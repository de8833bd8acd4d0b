package contract

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxTopicBytes is the longest topic name Kafka accepts.
const MaxTopicBytes = 249

// DefaultProgressTopic is the default progress topic of exactly-once relays
// (relay.KafkaConfig.ProgressTopic). Only a relay writes it: a row routed to it
// is dead-lettered (bad-topic), and outbox.Writer refuses a message that
// names it.
const DefaultProgressTopic = "pgoutbox.progress"

// FleetTopicPrefix begins the topic of each spread fleet's consumer group
// (pgoutbox.fleet.GROUP), whose partitions stand for the fleet's sources.
// Only relays use it: a row routed to a topic under it is dead-lettered
// (bad-topic), and outbox.Writer refuses a message that names one.
const FleetTopicPrefix = "pgoutbox.fleet."

// ErrInvalidTopic is wrapped by every error of CheckTopic.
var ErrInvalidTopic = errors.New("invalid topic")

// CheckTopic reports why name is not a legal Kafka topic name: it must be 1
// to MaxTopicBytes bytes of a-z, A-Z, 0-9, '.', '_' and '-', and neither "."
// nor "..". The error quotes at most a short excerpt of name, so a row's
// megabyte of topic never reaches a log line or a header whole.
func CheckTopic(name []byte) error {
	switch {
	case len(name) == 0:
		return fmt.Errorf("%w: topic is empty", ErrInvalidTopic)
	case len(name) > MaxTopicBytes:
		return fmt.Errorf("%w: topic %s is %d bytes long (Kafka allows at most %d)", ErrInvalidTopic, Excerpt(name, 64), len(name), MaxTopicBytes)
	case string(name) == "." || string(name) == "..":
		return fmt.Errorf("%w: topic %q is not a legal Kafka topic name", ErrInvalidTopic, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic %s is not a legal Kafka topic name (allowed: a-z A-Z 0-9 . _ -)", ErrInvalidTopic, Excerpt(name, 64))
		}
	}
	return nil
}

// Excerpt quotes at most the first n bytes of b (cut at a character
// boundary), marking a cut with "..." after the closing quote: a bounded
// form of an untrusted value for logs and error messages.
func Excerpt(b []byte, n int) string {
	if len(b) <= n {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q...", Cut(b, n))
}

// Cut is the longest prefix of b of at most n bytes that does not end
// inside a UTF-8 character (unless b is not UTF-8 there).
func Cut(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return b[:i]
		}
	}
	return b[:n]
}
