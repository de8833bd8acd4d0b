package relaycli

import (
	"io"
	"log/slog"
	"strings"
)

// newLogger returns a slog logger on w in the given level and format whose
// string and error attributes pass through sc.
func newLogger(w io.Writer, level, format string, sc *scrubber) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil || !validLevel(level) {
		return nil, usagef("--%s: %q is not one of debug, info, warn, error", flagLogLevel, level)
	}
	opts := &slog.HandlerOptions{
		Level: lvl,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch v := a.Value.Any().(type) {
			case string:
				return slog.String(a.Key, sc.String(v))
			case error:
				return slog.String(a.Key, sc.String(v.Error()))
			}
			return a
		},
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--%s: %q is not one of text, json", flagLogFormat, format)
}

func validLevel(s string) bool {
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		return true
	}
	return false
}
