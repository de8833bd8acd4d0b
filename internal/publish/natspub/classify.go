package natspub

import (
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// classify is the one table from a publish error to the sink's verdict.
func classify(err error) publish.Outcome {
	o := publish.Outcome{Verdict: publish.Retry, Err: err}
	var api *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum):
		o.Verdict, o.Reason = publish.Refused, publish.ReasonTooLarge
	case errors.Is(err, nats.ErrBadSubject), errors.Is(err, jetstream.ErrInvalidSubject):
		o.Verdict, o.Reason = publish.Refused, "illegal-subject"
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrStreamNotFound):
		// No stream captures the subject: the operator's to add.
		o.Verdict, o.Reason = publish.TopicUnavailable, publish.ReasonUnknownTopic
	case errors.Is(err, nats.ErrPermissionViolation):
		o.Verdict, o.Reason = publish.TopicUnavailable, publish.ReasonNotAuthorized
	case errors.As(err, &api) && api.Code == 400:
		// A stream limit or rule the record breaks (a subject the stream
		// denies, a header it refuses): retrying will not pass it.
		o.Verdict = publish.RefusedUnlessTransient
	}
	return o
}
