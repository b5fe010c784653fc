package loglevel

import (
	"fmt"
	"io"
	"log/slog"
)

// Parse reads a --log-level value: debug, info, warn or error (as
// slog.Level reads them, case-insensitively, with an optional offset such
// as info+2). Its error names the flag; the caller makes it a usage error.
func Parse(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// Logger is a text logger to w at the level s names (see Parse).
func Logger(w io.Writer, s string) (*slog.Logger, error) {
	l, err := Parse(s)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
