package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// builder checks the values of a file that go-toml decoded and the walker
// paired with their lines, and builds the Policy from them. Each table's
// build (and late) function, named in tables, is a method of builder.
type builder struct {
	c   *collector
	p   *Policy
	w   *walker
	cfg decoded
	dir string // relative ca_files are relative to it

	// What each table's build keeps to find repeats and conflicts.
	pats      map[string]*patState // [network]: the entries of each pattern
	resKeys   map[string]leaf      // [upstream] resolve keys by canonical name
	cas       map[string]leaf      // [upstream] ca_files by cleaned path
	caLines   []int                // the line of each of p.CAFiles
	httpHosts []hostEntry          // the host of each [[http]] rule
	pass      map[string]leaf      // [tls] passthrough entries by pattern
	passList  []hostEntry          // [tls] passthrough entries in file order
	mcpNames  []string             // the [mcp.servers] NAMEs written, built or not, sorted

	extraSecrets []Secret // the --secret flags (ParseWith)
	proxySecret  *leaf    // [upstream] proxy_secret, checked against the secrets
}

// build runs each table's build, then each table's late function, in the
// order of tables.
func (b *builder) build() {
	for i := range tables {
		if t := &tables[i]; t.build != nil {
			t.build(b, t)
		}
	}
	for i := range tables {
		if t := &tables[i]; t.late != nil {
			t.late(b, t)
		}
	}
}

// hostEntry is a host pattern of the file and its line.
type hostEntry struct {
	e    entry
	text string
	line int
}

// parseHostOnly parses a host pattern of [[http]] or [tls]: an entry
// without a port. portWhy says why a port is refused.
func parseHostOnly(s, portWhy string) (entry, string) {
	if i := strings.IndexByte(s, '/'); i >= 0 && !strings.Contains(s, "://") {
		return entry{}, "write only the host name here, like \"example.com\"; a path goes in paths = [\"/…\"] of an [[http]] rule"
	}
	e, problem := parseEntry(s)
	if problem == "" && e.port != 0 {
		problem = "write the name without a port: " + portWhy
	}
	return e, problem
}

// limit returns the integer at key of t, and whether it was written and is
// from 0 to most. A value out of range is reported with format, given the
// value and then args.
func (b *builder) limit(t *table, key string, most int64, format string, args ...any) (int, bool) {
	v, ok := b.cfg.intAt(t, key)
	if !ok {
		return 0, false
	}
	if v < 0 || v > most {
		b.c.add(b.w.keyLine([]string{t.name, key}), format, append([]any{v}, args...)...)
		return 0, false
	}
	return int(v), true
}

// hostPath resolves a path of the host that the file names (a secret's
// from_file, an MCP server's cwd): "~/" is the user's home, a relative
// path is relative to the policy file's directory. empty is the problem of
// an empty path.
func (b *builder) hostPath(f, empty string) (string, string) {
	switch {
	case f == "":
		return "", empty
	case strings.ContainsRune(f, 0):
		return "", "the path contains a NUL byte"
	case f == "~" || strings.HasPrefix(f, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Sprintf("\"~\" needs a home directory: %v; write the full path", err)
		}
		return filepath.Join(home, f[1:]), ""
	case strings.HasPrefix(f, "~"):
		return "", "only \"~/\" (your home) is expanded; write the full path"
	case !filepath.IsAbs(f):
		return filepath.Join(b.dir, f), ""
	}
	return filepath.Clean(f), ""
}
