// Package inboxrabbitmq is the RabbitMQ streams consumer loop of an
// inbox.Inbox: New(&Config[TTx]{URI, Stream, Name, Inbox, Handler or
// ExternalHandler}) and Consumer.Run. It settles each message as the Kafka
// loop (package inboxkafka) does, with the same outcomes, dead letters and
// metrics, through the same shared code.
//
//	c, err := inboxrabbitmq.New(&inboxrabbitmq.Config[pgx.Tx]{
//		URI: "rabbitmq-stream://guest:guest@127.0.0.1:5552/", Stream: "outbox.payment",
//		Name: "billing", Inbox: in, Handler: charge,
//	})
//	...
//	err = c.Run(ctx) // until ctx ends
//
// # Delivery and the stored offset
//
// The loop reads the stream from the offset stored under Config.Name
// (the broker keeps it, in the stream itself), or from the stream's first
// message when none is stored, and handles its messages one at a time, in
// order. A message's offset is stored only after the inbox settled it
// (the database commit, or its dead letter stored), every
// Config.StoreEvery settled messages, after a second without one, and at
// a graceful stop. A crash redelivers what was settled after the last
// stored offset (at most StoreEvery messages, or a second's): the inbox
// answers inbox.Duplicate for them. The first StoreEvery messages after a
// start count their attempt before it starts, so one that kills the
// process every time ends in the dead-letter stream rather than in a crash
// loop.
//
// Run one loop per stream and Name: a stream has no consumer group here
// (RabbitMQ 3.11 adds single active consumers). Two loops of one Name
// each handle every message, and the inbox makes the effect happen once.
//
// # Message contract
//
// The message ID and business key come from the message-id and
// business-key application properties, as the relay writes them (and
// CloudEvents' ce_id as for Kafka); every application property is a
// header of the inbox's message, the body its payload and the creation
// time its time. A message without them is dead-lettered with reason
// "missing-headers".
//
// # Dead letters
//
// Dead letters are published to the stream Config.DeadLetterStream
// (default "inbox.dlq", declared by the operator) and confirmed before the
// original's offset is stored, with the headers of package inboxkafka's
// dead letters as application properties (dlq-reason, dlq-detail,
// dlq-consumer, dlq-attempts, dlq-original-topic: the stream,
// dlq-original-partition: 0, dlq-original-offset: the stream offset).
//
// # Logging
//
// The stream client's own log lines go to log/slog's default logger
// (its errors and warnings at those levels, the rest at debug level),
// in every process that links this package.
package inboxrabbitmq
