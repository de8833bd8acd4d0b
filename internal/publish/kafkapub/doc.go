// Package kafkapub is the Kafka publisher: it implements publish.Publisher,
// publish.Transactional and publish.Reader with franz-go, through the
// producer of internal/producer (idempotent, acks=all, murmur2, the
// liveness-guarded dialer). It registers itself as "kafka", the relay's
// default sink.
//
// It maps each Record to a kgo.Record inside the package (no kgo type
// crosses a stage), Kafka's errors to the loop's verdicts (Outcome, by
// relayerr.Classify, the one Kafka error table), a session's identity to
// the transactional ID (whose InitProducerID fences older relays of the
// slot and aborts what they left open), and exactly-once progress to a
// record under the identity on the compacted, single-partition progress
// topic, with the reserved header contract.HeaderProgress that no outbox
// row may carry. The progress topic is created when missing, and refused
// when it has more than one partition or is not compacted.
package kafkapub
