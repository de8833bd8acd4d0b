package inbox

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// Dead-letter record headers, added to the original record's headers.
const (
	HeaderDLQReason            = contract.HeaderDLQReason
	HeaderDLQError             = "dlq-error"
	HeaderDLQConsumer          = "dlq-consumer"
	HeaderDLQAttempts          = "dlq-attempts"
	HeaderDLQOriginalTopic     = "dlq-original-topic"
	HeaderDLQOriginalPartition = "dlq-original-partition"
	HeaderDLQOriginalOffset    = "dlq-original-offset"
	// A conflict (reason "conflict") adds the stored side: the message ID,
	// business key and payload digest (hex) of the row the record conflicts
	// with, and the record's own payload digest; its own message ID and
	// business key are in the message-id and business-key headers.
	HeaderDLQConflictStoredMessageID   = "dlq-conflict-stored-message-id"
	HeaderDLQConflictStoredBusinessKey = "dlq-conflict-stored-business-key"
	HeaderDLQConflictStoredPayloadHash = "dlq-conflict-stored-payload-hash"
	HeaderDLQConflictPayloadHash       = "dlq-conflict-payload-hash"
	HeaderDLQConflictReason            = "dlq-conflict-reason"
)

// dlqHeaders are the headers the dead-letter writer sets; a record
// dead-lettered twice keeps only the latest.
var dlqHeaders = map[string]bool{
	HeaderDLQReason: true, HeaderDLQError: true, HeaderDLQConsumer: true, HeaderDLQAttempts: true,
	HeaderDLQOriginalTopic: true, HeaderDLQOriginalPartition: true, HeaderDLQOriginalOffset: true,
	HeaderDLQConflictStoredMessageID: true, HeaderDLQConflictStoredBusinessKey: true,
	HeaderDLQConflictStoredPayloadHash: true, HeaderDLQConflictPayloadHash: true, HeaderDLQConflictReason: true,
}

// deadLetterWriter produces dead-letter records, synchronously and with
// acks from every in-sync replica.
type deadLetterWriter struct {
	topic, consumer string
	errText         func(error) string // the dlq-error header (Inbox.errText)
	transport       *kafka.Transport
	w               *kafka.Writer
}

func newDeadLetterWriter(brokers []string, d *kafka.Dialer, topic string, in *Inbox) *deadLetterWriter {
	tr := &kafka.Transport{ClientID: "pgoutbox-inbox", DialTimeout: d.Timeout, TLS: d.TLS, SASL: d.SASLMechanism}
	return &deadLetterWriter{
		topic:     topic,
		consumer:  in.cfg.Consumer,
		errText:   in.errText,
		transport: tr,
		w: &kafka.Writer{
			Addr:                   kafka.TCP(brokers...),
			Topic:                  topic,
			Transport:              tr,
			RequiredAcks:           kafka.RequireAll,
			AllowAutoTopicCreation: true,
			BatchTimeout:           time.Millisecond,
			// One attempt per write: sendDeadLetter retries with its own
			// backoff and logging.
			MaxAttempts: 1,
		},
	}
}

func (d *deadLetterWriter) write(ctx context.Context, km kafka.Message, res Result) error {
	headers := make([]kafka.Header, 0, len(km.Headers)+12)
	for _, h := range km.Headers {
		if !dlqHeaders[h.Key] {
			headers = append(headers, h)
		}
	}
	errText := d.errText(res.Err)
	headers = append(headers,
		kafka.Header{Key: HeaderDLQReason, Value: []byte(res.Reason)},
		kafka.Header{Key: HeaderDLQError, Value: []byte(errText)},
		kafka.Header{Key: HeaderDLQConsumer, Value: []byte(d.consumer)},
		kafka.Header{Key: HeaderDLQAttempts, Value: []byte(strconv.Itoa(res.Attempts))},
		kafka.Header{Key: HeaderDLQOriginalTopic, Value: []byte(km.Topic)},
		kafka.Header{Key: HeaderDLQOriginalPartition, Value: []byte(strconv.Itoa(km.Partition))},
		kafka.Header{Key: HeaderDLQOriginalOffset, Value: []byte(strconv.FormatInt(km.Offset, 10))},
	)
	var cerr *ConflictError
	if errors.As(res.Err, &cerr) {
		headers = append(headers,
			kafka.Header{Key: HeaderDLQConflictReason, Value: []byte(cerr.Reason)},
			kafka.Header{Key: HeaderDLQConflictStoredMessageID, Value: []byte(cerr.StoredMessageID)},
			kafka.Header{Key: HeaderDLQConflictStoredBusinessKey, Value: []byte(cerr.StoredBusinessKey)},
			kafka.Header{Key: HeaderDLQConflictStoredPayloadHash, Value: []byte(hex.EncodeToString(cerr.StoredPayloadHash))},
			kafka.Header{Key: HeaderDLQConflictPayloadHash, Value: []byte(hex.EncodeToString(cerr.PayloadHash))},
		)
	}
	return d.w.WriteMessages(ctx, kafka.Message{Key: km.Key, Value: km.Value, Headers: headers, Time: km.Time})
}

// Close closes the writer and the connections of its transport.
func (d *deadLetterWriter) Close() error {
	err := d.w.Close()
	d.transport.CloseIdleConnections()
	return err
}
