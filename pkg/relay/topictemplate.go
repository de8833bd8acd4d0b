package relay

import (
	"strings"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// topicTemplate is a parsed TopicTemplate: literal text and the
// placeholders {aggregate_type} and {event_type}.
type topicTemplate []templatePart

type templatePart struct {
	literal string
	field   placeholder
}

// placeholder says what a templatePart stands for.
type placeholder int

const (
	literalPart       placeholder = iota // its literal text
	aggregateTypePart                    // {aggregate_type}
	eventTypePart                        // {event_type}
)

// parseTopicTemplate splits s at its placeholders, left to right, as
// strings.Replacer would replace them.
func parseTopicTemplate(s string) topicTemplate {
	var t topicTemplate
	for s != "" {
		a, e := strings.Index(s, "{aggregate_type}"), strings.Index(s, "{event_type}")
		i, n, field := a, len("{aggregate_type}"), aggregateTypePart
		if i < 0 || e >= 0 && e < i {
			i, n, field = e, len("{event_type}"), eventTypePart
		}
		if i < 0 {
			t = append(t, templatePart{literal: s})
			break
		}
		if i > 0 {
			t = append(t, templatePart{literal: s[:i]})
		}
		t = append(t, templatePart{field: field})
		s = s[i+n:]
	}
	return t
}

// uses reports whether the template has the placeholder of field
// (aggregateTypePart or eventTypePart).
func (t topicTemplate) uses(field placeholder) bool {
	for _, p := range t {
		if p.field == field {
			return true
		}
	}
	return false
}

// check reports why no row could have a legal topic under the template: its
// literal text alone is too long or holds a character Kafka refuses, or,
// without placeholders, it is not a legal topic name.
func (t topicTemplate) check() error {
	var lit []byte
	placeholders := false
	for _, p := range t {
		lit = append(lit, p.literal...)
		placeholders = placeholders || p.field != literalPart
	}
	if !placeholders || len(lit) > contract.MaxTopicBytes {
		return contract.CheckTopic(lit)
	}
	for _, p := range t {
		if p.literal == "" {
			continue
		}
		// A literal that is legal inside a longer name: "x" + the part.
		if err := contract.CheckTopic([]byte("x" + p.literal)); err != nil {
			return err
		}
	}
	return nil
}

// render appends the topic of a row with these aggregate and event types
// to dst.
func (t topicTemplate) render(dst, aggregateType, eventType []byte) []byte {
	for _, p := range t {
		switch p.field {
		case aggregateTypePart:
			dst = append(dst, aggregateType...)
		case eventTypePart:
			dst = append(dst, eventType...)
		default:
			dst = append(dst, p.literal...)
		}
	}
	return dst
}
