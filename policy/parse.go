package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"

	toml "github.com/pelletier/go-toml/v2"
)

// Parse works in this order, each step in a file of its own: the walker
// reads the TOML syntax tree and pairs each value with its line
// (tomlwalk.go); go-toml's strict decoder checks the file against the
// schema (schema.go), and what it rejects is explained to the user
// (diagnose.go); then each table's values are checked and built into the
// Policy (build.go, and build_<table>.go for each table). Every problem goes
// to one collector (errors.go). Load adds the checks of the CA files
// (load.go). A new table is an entry in tables (schema.go) and its
// build_<table>.go.

// Parse parses a policy file's bytes. name is used in error messages and as
// Policy.Source; relative ca_files are made relative to filepath.Dir(name).
//
// The rules for entries:
//
//   - network.default may be omitted; if present it must be "deny": capsem
//     is default-deny and ships no other default.
//   - An allow entry is "name" (port 443 only) or "name:port" (that port
//     only, 1..65535). A deny entry is "name" (every port, and DNS) or
//     "name:port" (that port only). Deny wins over allow.
//   - name is an exact DNS name or "*." followed by one. "*.x" matches every
//     name below x at any depth (a.x, b.a.x), never x itself. Labels are
//     letters, digits, "-" and "_", not starting or ending with "-", at most
//     63 characters; a name has at most 253. Matching ignores case and one
//     trailing dot, in the file and in queries.
//   - IP addresses (and names whose last label is a number, which resolvers
//     read as IP addresses, like "127.1") are rejected: the guest reaches
//     hosts only through capsem's DNS, direct-IP traffic is always refused,
//     and [upstream] resolve is the way to send a name to a fixed address.
//   - Anything else is an error: partial wildcards ("foo*.com", "a.*.b",
//     "**.x"), a bare "*" or "*.", URLs, paths, whitespace, empty entries,
//     bad ports, entries repeated in one list (after normalization, so
//     "x.com" and "X.com:443" are the same allow entry), and a deny entry
//     that cancels an allow entry of the same pattern (deny "x.com" with
//     allow "x.com:8080").
//   - upstream.resolve maps exact names (no wildcards) to "IP", "IP:port",
//     "[IPv6]:port", "host" or "host:port". Two keys naming the same host
//     (differing in case or a trailing dot) are an error.
//   - upstream.ca_files are paths; "" and "~/…" are errors, as are repeats.
//   - Each [[http]] table is a request rule; they are tried in file order
//     (see DecideHTTP). host is required: an exact name or "*.name", as in
//     the network entries, without a port. action is required: "allow" or
//     "deny". methods, optional, are HTTP tokens ("GET", matched ignoring
//     case). paths, optional, are patterns starting with "/" in which "*"
//     matches any run of characters, "/" included; they are in clean form
//     (no "//", "." or ".." segment) and hold only characters a path carries
//     unencoded (letters, digits, "-._~!$&'()+,;=:@/"), because requests are
//     matched after decoding: no "%", "?" (the query is never matched) or
//     "#". Empty or absent methods or paths match any. Repeats within one
//     rule are errors.
//   - tls.passthrough entries are names or "*.name" patterns, as in the
//     network entries, without a port. Repeats are errors, and so is an
//     entry covering a name that an [[http]] rule's host also covers: those
//     requests would not be decrypted, so the rule could not apply.
//   - mitm.preview_bytes is an integer from 0 (no previews) to 1048576.
//   - dns.max_wildcard_names is an integer from 0 (the default, 4096) to
//     262144: distinct names that only a wildcard entry allows, per session.
//   - Each [[secret]] table is a credential the guest gets only a
//     placeholder of (see Secret). name is an environment variable name;
//     exactly one of from_env (a host variable) and from_file (a path: "~/"
//     is the home directory, relative is to the policy file's directory);
//     hosts, at least one, are names or "*.name" patterns without a port;
//     placeholder, optional, is at least 16 printable ASCII characters;
//     in, optional, lists where the placeholder is replaced ("header",
//     "query", "path", "body", each once; default header and query).
//     Each host is allowed on port 443 as if [network] allowed it; a host a
//     deny entry of the same pattern denies, or one under [tls] passthrough,
//     is an error. Names are unique.
//   - dlp.action is "log" (the default), "block" or "off"; dlp.detectors
//     names detectors of package dlp (absent: all); dlp.allow_hosts are
//     names or "*.name" patterns whose requests are not scanned;
//     dlp.expected_hosts maps detector names to the names or "*.name"
//     patterns where their credential is expected, each list in place of
//     package dlp's for that detector (an empty one: nowhere);
//     dlp.default_expected_hosts = false drops package dlp's lists
//     (absent: true).
//   - mcp.hide_denied is true (the default) or false. Each [[mcp.rules]]
//     table is a rule for MCP tools/call requests, tried in file order (see
//     DecideMCPTool): server, required, is the NAME of an [mcp.servers.NAME]
//     table or a name or "*.name" pattern as in the network entries,
//     without a port, and not covering mcp.capsem.internal; tools,
//     optional, are non-empty globs ("*" matches any run) without repeats,
//     absent for every tool but never empty; action is "allow" or "deny".
//   - Each [mcp.servers.NAME] table is a server of the MCP gateway: NAME
//     is 1 to 64 letters, digits, "-" and "_"; exactly one of command (a
//     non-empty array, the program first) with env (variable names to
//     strings) and cwd (a path, resolved like from_file), or url (https,
//     with a host, no credentials or fragment) with headers (header names
//     to strings without line breaks). [tls] passthrough may not cover
//     mcp.capsem.internal.
//   - quic.mode is "intercept" (the default: QUIC to a name allowed on
//     port 443 is handed to the MITM) or "block" (refused at once).
//   - Unknown keys, keys not in lower case, and values of the wrong type are
//     errors.
//
// Every error carries "name:line" and says what to do. Parse reports up to
// 50 problems at once, sorted by line.
func Parse(name string, data []byte) (*Policy, error) {
	return ParseWith(name, data, nil)
}

// ParseWith is Parse with secrets from --secret flags (ParseSecretFlag)
// added after the file's [[secret]] tables, checked like them.
func ParseWith(name string, data []byte, secrets []Secret) (*Policy, error) {
	p, _, err := parse(name, filepath.Dir(name), data, secrets)
	return p, err
}

func parse(name, dir string, data []byte, secrets []Secret) (pol *Policy, caLines []int, err error) {
	c := &collector{file: name}
	defer func() {
		// go-toml is fuzzed upstream and so is this package; this is the
		// last line of defence of "bad input is an error, never a panic".
		if r := recover(); r != nil {
			pol, caLines = nil, nil
			err = &Error{File: name, Line: 1, Msg: fmt.Sprintf("internal error while reading this file (%v); please report it to the capsem developers with the file", r)}
		}
	}()

	sum := sha256.Sum256(data)
	// A UTF-8 byte order mark is harmless; drop it (lines do not move).
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))

	// The walker pairs values and keys with their lines; the decoder's
	// errors are then reported with the keys' full paths.
	w := &walker{c: c, lines: newLineIndex(data)}
	w.walk(data)

	cfg := newDecoded()
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if derr := dec.Decode(cfg.v.Addr().Interface()); derr != nil {
		var missing *toml.StrictMissingError
		var de *toml.DecodeError
		switch {
		case errors.As(derr, &missing):
			// Everything else decoded; report the unknown keys together
			// with the other problems of the file.
			for i := range missing.Errors[:min(len(missing.Errors), maxErrors)] {
				c.unknownKey(&missing.Errors[i], w)
			}
		case errors.As(derr, &de):
			c.decodeError(de, w)
			return nil, nil, c.err()
		default:
			c.add(1, "cannot read this file as TOML: %v", derr)
			return nil, nil, c.err()
		}
	}

	p := &Policy{
		exact:   map[string]*node{},
		wild:    map[string]*node{},
		resolve: map[string]Target{},
		Source:  name,
		SHA256:  hex.EncodeToString(sum[:]),
	}
	b := builder{c: c, p: p, w: w, cfg: cfg, dir: dir, extraSecrets: secrets}
	b.build()
	if len(c.errs) == 0 {
		w.crossCheck(cfg)
	}
	if err := c.err(); err != nil {
		return nil, nil, err
	}
	return p, b.caLines, nil
}
