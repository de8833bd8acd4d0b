// Package inboxnats is the NATS JetStream consumer loop of an inbox.Inbox:
// New(&Config[TTx]{URL, Stream, Durable, Inbox, Handler or
// ExternalHandler}) and Consumer.Run. It settles each message as the Kafka
// loop (package inboxkafka) does, with the same outcomes, dead letters
// and metrics, through the same shared code.
//
//	c, err := inboxnats.New(&inboxnats.Config[pgx.Tx]{
//		URL: "nats://127.0.0.1:4222", Stream: "OUTBOX", Durable: "billing",
//		Inbox: in, Handler: charge,
//	})
//	...
//	err = c.Run(ctx) // until ctx ends
//
// # Delivery
//
// The loop reads a durable pull consumer of the stream (created or
// updated by Run: explicit acknowledgement, Config.AckWait,
// Config.FilterSubjects) and handles its messages one at a time, in
// stream order. A message is acknowledged only after the inbox settled it:
// after the database commit, or once its dead letter is stored. While a
// message is handled or retried (inbox.Retry, inbox.Busy, the database
// unavailable) the loop tells the server it is in progress, so the
// server does not hand it to another instance. A crash redelivers what
// was not acknowledged; the inbox answers inbox.Duplicate for what had
// committed, and a redelivered message (NumDelivered above 1) counts its
// attempt before it starts, so one that kills the process every time
// ends in the dead-letter subject rather than in a crash loop.
//
// Order is the stream's per consumer. Several instances of one durable
// share its messages, so two of an aggregate can then be handled at once
// (the inbox still makes each effect happen once); for order per
// aggregate with parallelism, run one durable per subject bucket of the
// relay (FilterSubjects "outbox.payment.3", docs/sinks.md).
//
// # Message contract
//
// The message ID and business key come from the message-id and
// business-key headers, as the relay writes them (and CloudEvents' ce_id
// as for Kafka); JetStream's own headers (Nats-*) are not part of the
// message. A message without them is dead-lettered with reason
// "missing-headers".
//
// # Dead letters
//
// Dead letters are published to Config.DeadLetterSubject (default
// "inbox.dlq"), which a stream must capture, and acknowledged by it
// before the original is acknowledged, with the headers of package
// inboxkafka's dead letters (dlq-reason, dlq-detail, dlq-consumer,
// dlq-attempts, dlq-original-topic: the subject, dlq-original-partition:
// 0, dlq-original-offset: the stream sequence).
package inboxnats
