// Package producer is the relay's Kafka producer: one franz-go kgo client
// behind the few calls the sink makes. It configures the client the way
// the relay's contracts need it (docs/kafka.md):
//
//   - acks from all in-sync replicas, the idempotent producer (retries
//     never duplicate or reorder a partition; up to 5 requests in flight
//     per broker keep its order), linger 0: a batch goes as soon as the
//     client may send, so batching adapts to the load;
//   - Java-compatible partitioning: a record's key hashed with murmur2,
//     as the Java client and kafka-go's Murmur2Balancer do;
//   - metadata refreshed by kgo when a partition's leader moves;
//   - TLS, and SASL through franz-go's own mechanisms (Config.SASL, built
//     by kafkasasl.Config.KafkaMechanism: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER
//     with a token read from a file at every authentication, AWS MSK IAM
//     with static keys or the AWS SDK's default credential chain);
//   - every connection dialled by our Dialer, whose connections ask a
//     guard before each write (the relay's liveness check);
//   - each record batch kept under its topic's max.message.bytes, read
//     from the cluster before the first write to a topic;
//   - in transactional mode, one transaction per flush (see Txn).
//
// Produce writes records and waits for each record's outcome.
package producer
