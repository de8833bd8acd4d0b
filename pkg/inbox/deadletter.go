package inbox

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// Dead-letter record headers, added to the original record's headers.
const (
	HeaderDLQReason            = contract.HeaderDLQReason
	HeaderDLQDetail            = contract.HeaderDLQDetail
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
	HeaderDLQReason: true, HeaderDLQDetail: true, HeaderDLQConsumer: true, HeaderDLQAttempts: true,
	HeaderDLQOriginalTopic: true, HeaderDLQOriginalPartition: true, HeaderDLQOriginalOffset: true,
	HeaderDLQConflictStoredMessageID: true, HeaderDLQConflictStoredBusinessKey: true,
	HeaderDLQConflictStoredPayloadHash: true, HeaderDLQConflictPayloadHash: true, HeaderDLQConflictReason: true,
}

// deadLetterWriter produces dead-letter records, synchronously and with
// acks from every in-sync replica.
type deadLetterWriter struct {
	topic, consumer string
	errText         func(error) string // the dlq-detail header (Inbox.errText)
	transport       *kafka.Transport
	w               *kafka.Writer
}

func newDeadLetterWriter(brokers []string, d *kafka.Dialer, topic string, in *core) *deadLetterWriter {
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
		kafka.Header{Key: HeaderDLQDetail, Value: []byte(errText)},
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

// DeadLetterConfig configures a DeadLetterWriter; TTx is the transaction
// type of the Inbox's driver. Brokers and Inbox are required.
type DeadLetterConfig[TTx any] struct {
	// Brokers are the bootstrap addresses. Required.
	Brokers []string
	// Inbox is the inbox whose outcomes are settled; its consumer name goes
	// in the dlq-consumer header. After a dead letter is written the row
	// records it (dead_lettered_at) on the Inbox's database, so that a
	// redelivery of the FAILED_FINAL message does not write it again.
	// Required.
	Inbox *Inbox[TTx]
	// Topic receives the dead letters. Defaults to "inbox.dlq".
	Topic string
	// Dialer connects to the brokers (TLS, SASL, timeouts). Defaults to a
	// Dialer with a 10s timeout.
	Dialer *kafka.Dialer
}

// DeadLetterWriter settles the deliveries of a consumer loop of your own
// (franz-go, sarama, confluent-kafka-go): Settle writes the dead letter of a
// dead-lettered message, as NewConsumer's loop does, and says whether the
// record's offset may be committed. It is safe for concurrent use.
type DeadLetterWriter struct {
	w  *deadLetterWriter
	in *core
}

// NewDeadLetterWriter validates cfg and returns a DeadLetterWriter; Close it
// when the loop ends.
func NewDeadLetterWriter[TTx any](cfg *DeadLetterConfig[TTx]) (*DeadLetterWriter, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("inbox: dead-letter config is nil")
	case len(cfg.Brokers) == 0:
		return nil, errors.New("inbox: DeadLetterConfig.Brokers is required")
	case cfg.Inbox == nil:
		return nil, errors.New("inbox: DeadLetterConfig.Inbox is required")
	}
	d := &DeadLetterWriter{in: cfg.Inbox.core}
	topic, dialer := cfg.Topic, cfg.Dialer
	if topic == "" {
		topic = DefaultDeadLetterTopic
	}
	if dialer == nil {
		dialer = &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true}
	}
	d.w = newDeadLetterWriter(cfg.Brokers, dialer, topic, cfg.Inbox.core)
	return d, nil
}

// Settle finishes one delivery of rec in a consumer loop of your own. Pass
// what Process, ProcessTx or ProcessExternal returned for rec.Message(). It
// writes the dead letter of a DeadLettered outcome, and of a record Process
// refused (ErrInvalidMessage: no message-id or business-key header, a
// repeated contract header, or a key that breaks the key rules), and returns
// once every in-sync replica has it. The answer:
//
//   - true: Processed, Duplicate, or dead-lettered with the dead letter
//     written. Commit rec's offset.
//   - false, nil error: Retry or Busy. Deliver rec again after a backoff
//     (Config.Backoff), before any later record of its partition:
//     committing a later offset commits rec's too.
//   - false, an error: the outcome is unknown (Process failed: the
//     database), or the dead-letter write failed. Deliver rec again. An error
//     wrapping ErrConflict is a Conflict under ConflictPolicyStop: stop the
//     loop without committing.
func (d *DeadLetterWriter) Settle(ctx context.Context, rec KafkaRecord, res Result, err error) (commit bool, _ error) {
	km := rec.kafkaMessage()
	var bad *Result
	if errors.Is(err, ErrInvalidMessage) && res.Outcome == 0 {
		msg, b := messageFromKafka(km)
		if b == nil {
			b = &Result{Outcome: DeadLettered, Reason: ReasonInvalidKey, Err: err}
		}
		res, err, bad = d.in.deadLetterUnprocessable(&msg, *b), nil, b
	}
	switch {
	case err != nil:
		return false, err
	case !res.Outcome.Acked():
		return false, nil
	case res.Outcome != DeadLettered || res.deadLetterSent:
		return true, nil
	}
	if err := d.w.write(ctx, km, res); err != nil {
		return false, fmt.Errorf("inbox: write dead letter to %s: %w", d.w.topic, err)
	}
	if bad == nil && res.Reason != ReasonConflict {
		msg := rec.Message()
		d.in.markDeadLettered(context.WithoutCancel(ctx), &msg)
	}
	return true, nil
}

// Close closes the writer's connections.
func (d *DeadLetterWriter) Close() error { return d.w.Close() }
