package sandbox

import (
	"reflect"
	"testing"
)

func TestWithExecDefaults(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		tty  bool
		want []string
		why  string
	}{
		{nil, false, []string{"TERM=dumb", "LANG=C.UTF-8"}, "pipes: the output is no terminal"},
		{nil, true, []string{"TERM=xterm-256color", "LANG=C.UTF-8"}, "a pty draws"},
		{[]string{"TERM=vt100", "A=1"}, true, []string{"TERM=vt100", "A=1", "LANG=C.UTF-8"}, "what the host passed wins"},
		{[]string{"LANG=de_DE.UTF-8", "TERM=screen"}, false, []string{"LANG=de_DE.UTF-8", "TERM=screen"}, "nothing to add"},
		{[]string{"TERMINAL=x"}, false, []string{"TERMINAL=x", "TERM=dumb", "LANG=C.UTF-8"}, "a key is matched whole"},
	} {
		env := append([]string(nil), tc.env...)
		got := withExecDefaults(env, tc.tty)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("withExecDefaults(%q, tty %v) = %q, want %q (%s)", tc.env, tc.tty, got, tc.want, tc.why)
		}
		if !reflect.DeepEqual(env, tc.env) {
			t.Errorf("the caller's env changed to %q", env)
		}
	}
	// The caller's spare capacity is not written into.
	base := make([]string, 1, 4)
	base[0] = "A=1"
	_ = withExecDefaults(base, false)
	if ext := base[:2]; ext[1] != "" {
		t.Errorf("withExecDefaults wrote %q into the caller's array", ext[1])
	}
}
