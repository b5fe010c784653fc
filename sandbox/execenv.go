package sandbox

import "strings"

// execDefaults are what a command gets when the host passed no value: a
// terminal type that says what its output is, and UTF-8. They are laid
// here, in Sandbox.Exec, the one door every command goes through — capsem
// run's, capsem exec's and the API's (the Python client's) alike; before,
// only the CLI added them, and a command run through the API saw no TERM
// and no LANG (Python's stdio then was ASCII in some images).
var execDefaults = []struct {
	key       string
	pipe, tty string // the value for a command with pipes, on a pty
}{
	{"TERM", "dumb", "xterm-256color"},
	{"LANG", "C.UTF-8", "C.UTF-8"},
}

// withExecDefaults is env with each default the host did not set added
// (a copy: the caller's slice is left as it is).
func withExecDefaults(env []string, tty bool) []string {
	out := env[:len(env):len(env)] // an append copies
	for _, d := range execDefaults {
		if hasEnv(env, d.key) {
			continue
		}
		v := d.pipe
		if tty {
			v = d.tty
		}
		out = append(out, d.key+"="+v)
	}
	return out
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}
