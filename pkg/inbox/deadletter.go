package inbox

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/kgolog"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/kafkaclient"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
)

// DefaultDeadLetterTopic is the dead-letter topic used when
// DeadLetterConfig.Topic (or the consumer loop's DeadLetterTopic, package
// inboxkafka) is empty.
const DefaultDeadLetterTopic = "inbox.dlq"

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

// deadLetterWriter produces dead-letter records through its own kgo
// client, synchronously and with acks from every in-sync replica.
type deadLetterWriter struct {
	topic, consumer string
	errText         func(error) string  // the dlq-detail header (Inbox.errText)
	logKey          func(string) string // the stored business key, as logs show it
	cl              *kgo.Client
}

func newDeadLetterWriter(brokers []string, tlsCfg *tls.Config, sasl *kafkasasl.Config, topic string, in *core, more ...kgo.Opt) (*deadLetterWriter, error) {
	if err := kafkaclient.CheckSASL(sasl); err != nil {
		return nil, fmt.Errorf("inbox: dead-letter writer: SASL: %w", err)
	}
	opts := kafkaclient.Opts(brokers, tlsCfg, sasl, append([]kgo.Opt{
		kgo.WithLogger(kgolog.New(in.log)),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.AllowAutoTopicCreation(),
	}, more...)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("inbox: dead-letter writer: %w", err)
	}
	return &deadLetterWriter{topic: topic, consumer: in.cfg.Consumer, errText: in.errText, logKey: in.logKey, cl: cl}, nil
}

func (d *deadLetterWriter) write(ctx context.Context, km KafkaRecord, res Result) error {
	hs := deadLetterHeaders(km, res, d.consumer, d.errText, d.logKey)
	headers := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		headers[i] = kgo.RecordHeader(h)
	}
	r := &kgo.Record{Topic: d.topic, Key: km.Key, Value: km.Value, Headers: headers, Timestamp: km.Time}
	return d.cl.ProduceSync(ctx, r).FirstErr()
}

// deadLetterHeaders are the headers of km's dead letter for res, on any
// broker: km's own but its dlq-* ones, then the outcome's dlq-* headers
// (consumer names the inbox consumer; errText and logKey are the inbox's
// Inbox.errText and Inbox.logKey).
func deadLetterHeaders(km KafkaRecord, res Result, consumer string, errText func(error) string, logKey func(string) string) []KafkaHeader {
	headers := make([]KafkaHeader, 0, len(km.Headers)+12)
	// Every dlq-* header of the record, in any case, is dropped: a record
	// dead-lettered twice keeps only the latest, and no producer's header
	// poses as the writer's.
	for _, h := range km.Headers {
		if !contract.DeadLetterHeader(h.Key) {
			headers = append(headers, h)
		}
	}
	headers = append(headers,
		KafkaHeader{Key: HeaderDLQReason, Value: []byte(res.Reason)},
		KafkaHeader{Key: HeaderDLQDetail, Value: []byte(errText(res.Err))},
		KafkaHeader{Key: HeaderDLQConsumer, Value: []byte(consumer)},
		KafkaHeader{Key: HeaderDLQAttempts, Value: []byte(strconv.Itoa(res.Attempts))},
		KafkaHeader{Key: HeaderDLQOriginalTopic, Value: []byte(km.Topic)},
		KafkaHeader{Key: HeaderDLQOriginalPartition, Value: []byte(strconv.Itoa(km.Partition))},
		KafkaHeader{Key: HeaderDLQOriginalOffset, Value: []byte(strconv.FormatInt(km.Offset, 10))},
	)
	var cerr *ConflictError
	if errors.As(res.Err, &cerr) {
		headers = append(headers,
			KafkaHeader{Key: HeaderDLQConflictReason, Value: []byte(cerr.Reason)},
			KafkaHeader{Key: HeaderDLQConflictStoredMessageID, Value: []byte(cerr.StoredMessageID)},
			// Another message's key, often personal data: shortened as
			// the logs show it (whole with Config.LogFullKeys).
			KafkaHeader{Key: HeaderDLQConflictStoredBusinessKey, Value: []byte(logKey(cerr.StoredBusinessKey))},
			KafkaHeader{Key: HeaderDLQConflictStoredPayloadHash, Value: []byte(hex.EncodeToString(cerr.StoredPayloadHash))},
			KafkaHeader{Key: HeaderDLQConflictPayloadHash, Value: []byte(hex.EncodeToString(cerr.PayloadHash))},
		)
	}
	return headers
}

// Close closes the writer's client.
func (d *deadLetterWriter) Close() error {
	d.cl.Close()
	return nil
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
	// TLS enables TLS to the brokers when non-nil. Defaults to plaintext.
	TLS *tls.Config
	// SASL authenticates to the brokers when non-nil (see
	// inboxkafka.Config.SASL). Defaults to none.
	SASL *kafkasasl.Config
	// KafkaOpts are more franz-go client options, applied after the
	// writer's own. Defaults to none.
	KafkaOpts []kgo.Opt
}

// DeadLetterWriter settles the deliveries of a consumer loop of your own
// (franz-go, kafka-go through package inboxkafkago, sarama,
// confluent-kafka-go): Settle writes the dead letter of a dead-lettered
// message, as the loop of package inboxkafka does, through a franz-go client of its
// own, and says whether the record's offset may be committed. It is safe
// for concurrent use.
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
	topic := cfg.Topic
	if topic == "" {
		topic = DefaultDeadLetterTopic
	}
	w, err := newDeadLetterWriter(cfg.Brokers, cfg.TLS, cfg.SASL, topic, cfg.Inbox.core, cfg.KafkaOpts...)
	if err != nil {
		return nil, err
	}
	return &DeadLetterWriter{w: w, in: cfg.Inbox.core}, nil
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
	var bad *Result
	if errors.Is(err, ErrInvalidMessage) && res.Outcome == 0 {
		msg, b := messageFromKafka(rec)
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
	if err := d.w.write(ctx, rec, res); err != nil {
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

// Deliver takes one delivery of rec in a consumer loop of your own to a
// settled outcome, so that the loop only fetches and commits: it processes
// rec.Message() with handler (Inbox.Process: the claim and the handler's
// writes in one transaction), hands the result to w.Settle (which writes
// the dead letter of a DeadLettered message or of a record Process refused),
// and while the outcome is not settled (Retry, Busy, or unknown because the
// database or the dead-letter write failed) processes the same record again
// after Config.Backoff. Deliver starts nothing once ctx has ended, but an
// attempt once started runs to its end (it would be repeated otherwise);
// ctx bounds the waits between attempts. w must be a DeadLetterWriter of
// in.
//
// A nil error means commit rec's offset; the Result is the last attempt's
// (Attempts counts them all). An error means commit nothing: ctx ended
// before the outcome was settled (rec is delivered again later), or an
// error wrapping ErrConflict, a Conflict under ConflictPolicyStop: stop the
// loop.
func Deliver[TTx any](ctx context.Context, in *Inbox[TTx], w *DeadLetterWriter, rec KafkaRecord, handler TxHandler[TTx]) (Result, error) {
	if w == nil || in == nil || w.in != in.core {
		return Result{}, errors.New("inbox: Deliver needs an Inbox and a DeadLetterWriter of that Inbox")
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err // not started: delivered again
	}
	msg := rec.Message()
	work := context.WithoutCancel(ctx)
	for attempt := 1; ; attempt++ {
		res, err := in.Process(work, msg, handler)
		commit, err := w.Settle(work, rec, res, err)
		switch {
		case commit:
			return res, nil
		case errors.Is(err, ErrConflict):
			return res, err
		}
		wait := time.NewTimer(in.cfg.Backoff(attempt))
		select {
		case <-ctx.Done():
			wait.Stop()
			return res, ctx.Err()
		case <-wait.C:
		}
	}
}
