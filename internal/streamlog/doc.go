// Package streamlog routes the RabbitMQ stream client's log lines to
// log/slog's default logger in every process that links it: the client's
// errors and warnings at those levels, its information and debugging
// lines at debug level, and the lines its own Close provokes on the
// connection it is closing ("use of closed network connection", a broken
// pipe) at debug level too (streamlog.go says why they happen).
//
// The client's logger is one per process, a plain variable its
// connections' goroutines read as they log, so it is set at init, before
// any connection runs. Import the package for that effect:
//
//	import _ "github.com/pgoutbox/pgoutbox/internal/streamlog"
package streamlog
