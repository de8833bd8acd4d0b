package streamconn

import "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

// Options returns the environment options of a connection to uri, with
// the socket buffers left to the kernel (a size of 0 makes the client set
// none).
func Options(uri string) *stream.EnvironmentOptions {
	return stream.NewEnvironmentOptions().SetUri(uri).SetReadBuffer(0).SetWriteBuffer(0)
}
