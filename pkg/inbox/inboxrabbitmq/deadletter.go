package inboxrabbitmq

import (
	"context"
	"errors"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// errProducerClosed is a dead-letter write whose producer closed first.
var errProducerClosed = errors.New("inboxrabbitmq: dead-letter producer closed before the confirmation")

// deadLetters writes dead letters to a stream, one at a time, each
// confirmed before write returns.
type deadLetters struct {
	env      *stream.Environment
	stream   string
	p        *stream.Producer
	confirms stream.ChannelPublishConfirm
	seq      int64
}

// write publishes a dead letter with headers as application properties
// and waits for its confirmation.
func (d *deadLetters) write(ctx context.Context, km inbox.KafkaRecord, headers []inbox.KafkaHeader) error {
	if d.p == nil {
		p, err := d.env.NewProducer(d.stream, stream.NewProducerOptions().SetClientProvidedName("pgoutbox-inbox-dlq"))
		if err != nil {
			return err
		}
		d.p, d.confirms = p, p.NotifyPublishConfirmation()
	}
	m := amqp.NewMessage(km.Value)
	m.Properties = &amqp.MessageProperties{CreationTime: km.Time}
	m.ApplicationProperties = make(map[string]any, len(headers))
	for _, h := range headers {
		m.ApplicationProperties[h.Key] = string(h.Value)
	}
	d.seq++
	m.SetPublishingId(d.seq)
	if err := d.p.Send(m); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case batch, ok := <-d.confirms:
			if !ok {
				d.p = nil
				return errProducerClosed
			}
			for _, cs := range batch {
				if cs.GetPublishingId() != d.seq {
					continue // a late confirmation of an earlier attempt
				}
				if cs.IsConfirmed() {
					return nil
				}
				return cs.GetError()
			}
		}
	}
}

// close closes the producer.
func (d *deadLetters) close() {
	if d.p != nil {
		_ = d.p.Close()
	}
}
