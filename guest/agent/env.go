package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultPath is the PATH every command gets unless the host sends one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultShell is the shell a session without argv runs: /bin/bash if the
// guest has it, else /bin/sh.
func DefaultShell() string {
	if executable("/bin/bash") == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

// DefaultEnv is the guest-defined base environment for a shell at shell.
func DefaultEnv(shell string) []string {
	return []string{"PATH=" + DefaultPath, "HOME=/root", "SHELL=" + shell}
}

// BuildEnv merges the guest's base environment with what the host sent for
// one command: a key the host sent replaces the base's, otherwise order is
// kept and later duplicates win. Nothing else enters — in particular not the
// agent's own environment. An entry without "=", with an empty key or with
// a NUL byte is refused.
func BuildEnv(base, sent []string) ([]string, error) {
	var out []string
	idx := map[string]int{}
	add := func(kv string, from string) error {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("environment entry %q from the %s: want KEY=value without NUL bytes", kv, from)
		}
		if i, dup := idx[k]; dup {
			out[i] = kv
			return nil
		}
		idx[k] = len(out)
		out = append(out, kv)
		return nil
	}
	for _, kv := range base {
		if err := add(kv, "guest"); err != nil {
			return nil, err
		}
	}
	for _, kv := range sent {
		if err := add(kv, "host"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Getenv returns key's value in env ("" if absent).
func Getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Errors of LookPath, with the exit status a shell reports for them.
var (
	ErrNotFound      = errors.New("executable file not found in $PATH")
	ErrNotExecutable = errors.New("not an executable file")
)

// LookPath finds file the way a shell does, but in the PATH of the
// command's environment (pathEnv), not the agent's: the agent runs as PID 1
// with the kernel's bare environment. A name with a slash is used as given
// (relative to dir if relative).
func LookPath(file, pathEnv, dir string) (string, error) {
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		return file, nil
	}
	if file == "" {
		return "", fmt.Errorf("empty command name: %w", ErrNotFound)
	}
	denied := false
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, file)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		switch err := executable(p); {
		case err == nil:
			return p, nil
		case errors.Is(err, ErrNotExecutable):
			denied = true
		}
	}
	if denied {
		return "", fmt.Errorf("%s: %w", file, ErrNotExecutable)
	}
	return "", fmt.Errorf("%s: %w", file, ErrNotFound)
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ErrNotFound
		}
		return ErrNotExecutable
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return ErrNotExecutable
	}
	return nil
}

// ExitCodeFor is the status a shell reports for a command that could not
// start with err: 127 not found, 126 otherwise.
func ExitCodeFor(err error) int {
	if errors.Is(err, ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}
