package policy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
)

// TestSchemaComplete checks that each table of the schema says what its
// values must be, is built, and is documented in doc.go.
func TestSchemaComplete(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if !strings.HasPrefix(tb.want, tb.header()+" ") {
			t.Errorf("%s: want %q does not start with the table's header", tb.name, tb.want)
		}
		if tb.array != (tb.notArray != "") {
			t.Errorf("%s: notArray %q for array=%v", tb.name, tb.notArray, tb.array)
		}
		if tb.build == nil && tb.late == nil {
			t.Errorf("%s: no build function", tb.name)
		}
		if !strings.Contains(string(doc), "//\t"+tb.header()) {
			t.Errorf("%s: doc.go does not show the table", tb.name)
		}
		for _, k := range tb.keys {
			if !strings.HasPrefix(k.want, tb.keyPath()+"."+k.name+" must ") {
				t.Errorf("%s.%s: want %q does not start with the key", tb.name, k.name, k.want)
			}
			if !regexp.MustCompile(`\b` + k.name + ` *= `).Match(doc) {
				t.Errorf("%s.%s: doc.go does not show the key", tb.name, k.name)
			}
		}
	}
}

// TestCrossCheckMessage checks the message of a walker that missed a value
// the decoder read.
func TestCrossCheckMessage(t *testing.T) {
	data := []byte(`[network]
default = "deny"
allow = ["a.test", "b.test"]
[upstream]
resolve = { "a.test" = "127.0.0.1" }
[[http]]
host = "a.test"
methods = ["GET"]
action = "allow"
[tls]
passthrough = ["c.test"]
`)
	c := &collector{file: "f.toml"}
	w := &walker{c: c, lines: newLineIndex(data)}
	w.walk(data)
	cfg := newDecoded()
	if err := toml.Unmarshal(data, cfg.v.Addr().Interface()); err != nil {
		t.Fatal(err)
	}
	w.crossCheck(cfg)
	if err := c.err(); err != nil {
		t.Fatalf("walker and decoder disagree on a good file: %v", err)
	}
	w.leaves = slices.DeleteFunc(w.leaves, func(l leaf) bool { return l.value == "b.test" })
	w.crossCheck(cfg)
	want := "f.toml:1: internal error: the policy was read two ways that disagree (default 1/1, unknown 0/0, allow 1/2, deny 0/0, proxy 0/0, proxy_secret 0/0, resolve 1/1, ca_files 0/0, no_proxy 0/0, passthrough 1/1, action 0/0, detectors 0/0, allow_hosts 0/0, expected_hosts 0/0, unknown 0/0, mode 0/0, http [[1 1 1 0]]/[[1 1 1 0]], secret []/[], mcp.rules []/[], mcp.servers []/[], forward []/[]); please report this file to the capsem developers"
	if err := c.err(); err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}
