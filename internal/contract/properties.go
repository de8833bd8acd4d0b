package contract

import (
	"fmt"
	"maps"
	"slices"
)

// EachProperty calls each with every application property of an AMQP 1.0
// message (a RabbitMQ stream message: the relay writes the record's
// headers there as strings) in the order of their names, its value as a
// header's bytes: a string's or a binary's bytes, any other value printed
// (fmt). The relay's read side and the inbox's RabbitMQ loop read
// headers through it alike.
func EachProperty(props map[string]any, each func(name string, value []byte)) {
	for _, k := range slices.Sorted(maps.Keys(props)) {
		var v []byte
		switch x := props[k].(type) {
		case string:
			v = []byte(x)
		case []byte:
			v = x
		default:
			v = fmt.Append(nil, x)
		}
		each(k, v)
	}
}
