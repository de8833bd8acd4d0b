// Package backoff is the relay's one exponential backoff: the sink's
// retries of a failed Kafka write and the session loop's reconnects both
// wait First, then twice as long each time, up to Max (relay.Config's
// RetryBackoff and MaxRetryBackoff).
package backoff
