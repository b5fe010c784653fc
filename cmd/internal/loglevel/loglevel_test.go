package loglevel

import (
	"log/slog"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want slog.Level
		ok   bool
		why  string
	}{
		{"debug", slog.LevelDebug, true, "the four words"},
		{"info", slog.LevelInfo, true, ""},
		{"warn", slog.LevelWarn, true, ""},
		{"error", slog.LevelError, true, ""},
		{"WARN", slog.LevelWarn, true, "any case, as slog reads it"},
		{"loud", 0, false, "an unknown word"},
		{"", 0, false, "empty is not a level"},
	} {
		got, err := Parse(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v ok=%v (%s)", c.in, got, err, c.want, c.ok, c.why)
		}
		if err != nil && !strings.Contains(err.Error(), `--log-level "`+c.in+`": want debug, info, warn or error`) {
			t.Errorf("Parse(%q): the error does not name the flag and the choices: %v", c.in, err)
		}
	}
}
