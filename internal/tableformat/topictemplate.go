package tableformat

import (
	"strings"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// TopicTemplate is a parsed topic template (Config.TopicTemplate): literal text and the
// placeholders {aggregate_type} and {event_type}.
type TopicTemplate []templatePart

type templatePart struct {
	literal string
	field   Placeholder
}

// Placeholder says what a part of a TopicTemplate stands for.
type Placeholder int

const (
	literalPart       Placeholder = iota // its literal text
	AggregateTypePart                    // {aggregate_type}
	EventTypePart                        // {event_type}
)

// ParseTopicTemplate splits s at its placeholders, left to right, as
// strings.Replacer would replace them.
func ParseTopicTemplate(s string) TopicTemplate {
	var t TopicTemplate
	for s != "" {
		a, e := strings.Index(s, "{aggregate_type}"), strings.Index(s, "{event_type}")
		i, n, field := a, len("{aggregate_type}"), AggregateTypePart
		if i < 0 || e >= 0 && e < i {
			i, n, field = e, len("{event_type}"), EventTypePart
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

// Uses reports whether the template has the placeholder of field
// (AggregateTypePart or EventTypePart).
func (t TopicTemplate) Uses(field Placeholder) bool {
	for _, p := range t {
		if p.field == field {
			return true
		}
	}
	return false
}

// Check reports why no row could have a legal topic under the template: its
// literal text alone is too long or holds a character Kafka refuses, or,
// without placeholders, it is not a legal topic name.
func (t TopicTemplate) Check() error {
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

// Render appends the topic of a row with these aggregate and event types
// to dst.
func (t TopicTemplate) Render(dst, aggregateType, eventType []byte) []byte {
	for _, p := range t {
		switch p.field {
		case AggregateTypePart:
			dst = append(dst, aggregateType...)
		case EventTypePart:
			dst = append(dst, eventType...)
		default:
			dst = append(dst, p.literal...)
		}
	}
	return dst
}
