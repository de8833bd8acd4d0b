// Package streamconn makes the RabbitMQ stream client environment options
// every stream connection of pgoutbox takes (the relay's publisher and its
// reader, the inbox loop): the URI, and the kernel's own socket buffer
// sizing in place of the client's 8 KiB buffers.
//
// The stream client (github.com/rabbitmq/rabbitmq-stream-go-client) sets
// SO_RCVBUF and SO_SNDBUF to 8 KiB on each connection unless told
// otherwise. A receive window that small throttles a consumer to a few
// kilobytes per round trip, and on loopback, whose segments are larger
// than the window, to one window per delayed acknowledgement: a consumer
// read a stream of 20,000 messages of 300 bytes at about 200 messages a
// second (the node and the client idle, the sender limited by the
// receive window all the time), and in 108 ms with the kernel's sizing.
package streamconn
