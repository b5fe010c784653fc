package policy

// The tables and keys of a policy file (doc.go draws a whole file):
//
//	[network]   default allow deny unknown ask_timeout
//	[upstream]  resolve ca_files allow_private proxy no_proxy proxy_secret
//	[[http]]    host methods paths action        (an array of tables)
//	[tls]       passthrough
//	[mitm]      preview_bytes
//	[dns]       max_wildcard_names
//	[[secret]]  name from_env from_file hosts placeholder in   (an array of tables)
//	[dlp]       action detectors allow_hosts expected_hosts default_expected_hosts
//	[mcp]       hide_denied unknown ask_timeout
//	[[mcp.rules]]        server tools action       (an array of tables in [mcp])
//	[mcp.servers.NAME]   command env cwd url headers   (a table per NAME the user chooses)
//	[quic]      mode
//	[[forward]] name port to                   (an array of tables)
//
// Stability: these names are what users write in their files. A key can be
// added; renaming or removing one breaks every file that uses it.
//
// tables is the one definition of this schema. From it come the struct
// go-toml's strict decoder fills (schemaType); the keys that the
// diagnostics suggest, check the case of and list, and what they tell a
// user who wrote a value of the wrong type (diagnose.go); the arrays of
// tables whose elements the walker tells apart (tomlwalk.go), and the
// counts it checks against the decoder (crossCheck); and the order in
// which the tables are built (build.go). A new table is an entry here and
// its build function, in build_<table>.go.

import (
	"reflect"
	"slices"
	"strings"
)

// keyKind is the TOML type of a key's value.
type keyKind int

const (
	kindString      keyKind = iota // "x"
	kindStrings                    // ["x", "y"]
	kindStringMap                  // { "k" = "v" }
	kindStringLists                // { "k" = ["x", "y"] }
	kindBool                       // true
	kindInt                        // 4096
)

// goType is the type of the field go-toml decodes a key of kind k into: a
// pointer for a single value, so that an absent key is nil.
func (k keyKind) goType() reflect.Type {
	switch k {
	case kindString:
		return reflect.TypeFor[*string]()
	case kindStrings:
		return reflect.TypeFor[[]string]()
	case kindStringMap:
		return reflect.TypeFor[map[string]string]()
	case kindStringLists:
		return reflect.TypeFor[map[string][]string]()
	case kindBool:
		return reflect.TypeFor[*bool]()
	}
	return reflect.TypeFor[*int64]()
}

// holdsStrings reports whether the walker reads the values of a key of
// kind k as string leaves (the other kinds it leaves to the decoder).
func (k keyKind) holdsStrings() bool {
	return k == kindString || k == kindStrings || k == kindStringMap || k == kindStringLists
}

// key is one key of a table.
type key struct {
	name string
	kind keyKind
	want string // what its value must be, told to a user who wrote another type
}

// table is one table of the policy file.
type table struct {
	// name is the table's path, its parts joined by ".": "network", or
	// "mcp.rules" for a table inside [mcp]. A table inside another is
	// listed after it.
	name string
	// array: the table is an array of tables, each element started by a
	// "[[name]]" line (or written inline: name = [{ … }, { … }]).
	array bool
	// named: the table holds tables under names the user chooses, each
	// started by a "[name.NAME]" line (or written inline: name = { NAME =
	// { … } }); its keys are the keys of each of them.
	named bool
	// notArray, for an array, is the problem of writing it as one table.
	notArray string
	// want is what the table must be, told to a user who wrote another type.
	want string
	keys []key
	// build checks the table's values and adds them to the policy. Tables
	// are built in this order; nil builds nothing. It is given its table
	// rather than look it up: tables names the function, so a lookup would
	// make tables refer to itself ("initialization cycle").
	build func(*builder, *table)
	// late, when set, runs after every table's build, in this order: for
	// what needs the problems or entries of the other tables.
	late func(*builder, *table)
}

// tables are the policy file's tables, in the order the docs give them (and
// the error messages list them).
var tables = []table{
	{
		name: "network",
		want: "[network] must be a table: a \"[network]\" line followed by its keys",
		keys: []key{
			{"default", kindString, "network.default must be the string \"deny\", like default = \"deny\""},
			{"allow", kindStrings, "network.allow must be an array of strings, like allow = [\"example.com\", \"pypi.org:443\"]"},
			{"deny", kindStrings, "network.deny must be an array of strings, like deny = [\"uploads.example.com\"]"},
			{"unknown", kindString, "network.unknown must be the string \"deny\" or \"ask\", like unknown = \"ask\""},
			{"ask_timeout", kindInt, "network.ask_timeout must be a whole number of seconds, without quotes, like ask_timeout = 60"},
		},
		build: (*builder).network,
	},
	{
		name: "upstream",
		want: "[upstream] must be a table: an \"[upstream]\" line followed by its keys",
		keys: []key{
			{"resolve", kindStringMap, "upstream.resolve must map quoted host names to strings, like resolve = { \"api.example.com\" = \"127.0.0.1:8443\" } (quote names: a dotted key makes nested tables)"},
			{"ca_files", kindStrings, "upstream.ca_files must be an array of path strings, like ca_files = [\"roots.pem\"]"},
			{"allow_private", kindBool, "upstream.allow_private must be true or false, without quotes"},
			{"proxy", kindString, "upstream.proxy must be a string, like proxy = \"http://proxy.corp:3128\""},
			{"no_proxy", kindStrings, "upstream.no_proxy must be an array of host names, like no_proxy = [\"*.corp.example\"]"},
			{"proxy_secret", kindString, "upstream.proxy_secret must be the name of a [[secret]], like proxy_secret = \"CORP_PROXY\""},
		},
		build: (*builder).upstream,
	},
	{
		name:     "http",
		array:    true,
		notArray: "[[http]] rules are an array of tables: start each rule with a \"[[http]]\" line (two brackets), then its keys",
		want:     "[[http]] rules must be tables, each started by a \"[[http]]\" line, with host and action strings and methods and paths arrays of strings",
		keys: []key{
			{"host", kindString, "http.host must be a string, like host = \"api.example.com\""},
			{"methods", kindStrings, "http.methods must be an array of strings, like methods = [\"GET\", \"HEAD\"]"},
			{"paths", kindStrings, "http.paths must be an array of strings, like paths = [\"/repos/*\"]"},
			{"action", kindString, "http.action must be the string \"allow\" or \"deny\", like action = \"deny\""},
		},
		// Late: a rule whose lines already hold a reported problem (a
		// misspelt key above all) is not also told that it has no host.
		late: (*builder).httpRules,
	},
	{
		name: "tls",
		want: "[tls] must be a table: a \"[tls]\" line followed by its keys",
		keys: []key{
			{"passthrough", kindStrings, "tls.passthrough must be an array of strings, like passthrough = [\"pinned.example.com\"]"},
		},
		build: (*builder).passthrough,
		// Late: an entry is checked against the hosts of the [[http]] rules.
		late: (*builder).passthroughConflicts,
	},
	{
		name: "mitm",
		want: "[mitm] must be a table: a \"[mitm]\" line followed by its keys",
		keys: []key{
			{"preview_bytes", kindInt, "mitm.preview_bytes must be a whole number of bytes, without quotes, like preview_bytes = 4096"},
		},
		build: (*builder).mitm,
	},
	{
		name: "dns",
		want: "[dns] must be a table: a \"[dns]\" line followed by its keys",
		keys: []key{
			{"max_wildcard_names", kindInt, "dns.max_wildcard_names must be a whole number of names, without quotes, like max_wildcard_names = 4096"},
		},
		build: (*builder).dns,
	},
	{
		name:     "secret",
		array:    true,
		notArray: "[[secret]] tables are an array of tables: start each secret with a \"[[secret]]\" line (two brackets), then its keys",
		want:     "[[secret]] must be tables, each started by a \"[[secret]]\" line, with name, from_env or from_file, and placeholder strings and hosts and in arrays of strings",
		keys: []key{
			{"name", kindString, "secret.name must be a string, like name = \"ANTHROPIC_API_KEY\""},
			{"from_env", kindString, "secret.from_env must be a string, like from_env = \"ANTHROPIC_API_KEY\""},
			{"from_file", kindString, "secret.from_file must be a path string, like from_file = \"~/.config/anthropic.key\""},
			{"hosts", kindStrings, "secret.hosts must be an array of strings, like hosts = [\"api.anthropic.com\"]"},
			{"placeholder", kindString, "secret.placeholder must be a string, like placeholder = \"capsem-placeholder-anthropic\""},
			{"in", kindStrings, "secret.in must be an array of strings, like in = [\"header\", \"query\", \"body\"]"},
		},
		// Late, in this order after [[http]] and [tls]: a rule whose lines
		// hold a reported problem is not also told what it lacks, and its
		// hosts are allowed after [network] and checked against its denies
		// and [tls] passthrough.
		late: (*builder).secretLate,
	},
	{
		name: "dlp",
		want: "[dlp] must be a table: a \"[dlp]\" line followed by its keys",
		keys: []key{
			{"action", kindString, "dlp.action must be the string \"log\", \"block\" or \"off\", like action = \"block\""},
			{"detectors", kindStrings, "dlp.detectors must be an array of strings, like detectors = [\"aws-access-key\", \"github-token\"]"},
			{"allow_hosts", kindStrings, "dlp.allow_hosts must be an array of strings, like allow_hosts = [\"internal.example.com\"]"},
			{"expected_hosts", kindStringLists, "dlp.expected_hosts must map quoted detector names to arrays of strings, like expected_hosts = { \"github-token\" = [\"github.example.com\"] }"},
			{"default_expected_hosts", kindBool, "dlp.default_expected_hosts must be true or false, without quotes"},
		},
		build: (*builder).dlpTable,
	},
	{
		name: "mcp",
		want: "[mcp] must be a table: an \"[mcp]\" line followed by its keys, with [[mcp.rules]] and [mcp.servers.NAME] tables below it",
		keys: []key{
			{"hide_denied", kindBool, "mcp.hide_denied must be true or false, without quotes"},
			{"unknown", kindString, "mcp.unknown must be the string \"allow\", \"deny\" or \"ask\", like unknown = \"ask\""},
			{"ask_timeout", kindInt, "mcp.ask_timeout must be a whole number of seconds, without quotes, like ask_timeout = 60"},
		},
		build: (*builder).mcp,
	},
	{
		name:     "mcp.rules",
		array:    true,
		notArray: "[[mcp.rules]] are an array of tables: start each rule with a \"[[mcp.rules]]\" line (two brackets), then its keys",
		want:     "[[mcp.rules]] must be tables, each started by a \"[[mcp.rules]]\" line, with server and action strings and a tools array of strings",
		keys: []key{
			{"server", kindString, "mcp.rules.server must be a string, like server = \"mcp.example.com\" or the NAME of an [mcp.servers.NAME] table"},
			{"tools", kindStrings, "mcp.rules.tools must be an array of strings, like tools = [\"read_*\", \"search\"]"},
			{"action", kindString, "mcp.rules.action must be the string \"allow\" or \"deny\", like action = \"deny\""},
		},
		// Late, after [mcp.servers]: a server is a host or the NAME of a
		// server, so the servers must be known.
		late: (*builder).mcpRules,
	},
	{
		name:  "mcp.servers",
		named: true,
		want:  "[mcp.servers.NAME] must be a table: an \"[mcp.servers.NAME]\" line (NAME of your choice, like github) followed by command or url and their keys",
		keys: []key{
			{"command", kindStrings, "mcp.servers.NAME.command must be an array of strings, the program then its arguments, like command = [\"npx\", \"-y\", \"@modelcontextprotocol/server-github\"]"},
			{"env", kindStringMap, "mcp.servers.NAME.env must map variable names to strings, like env = { GITHUB_TOKEN = \"…\" }"},
			{"cwd", kindString, "mcp.servers.NAME.cwd must be a path string, like cwd = \"~/src\""},
			{"url", kindString, "mcp.servers.NAME.url must be a string, like url = \"https://mcp.example.com/mcp\""},
			{"headers", kindStringMap, "mcp.servers.NAME.headers must map header names to strings, like headers = { Authorization = \"Bearer …\" }"},
		},
		build: (*builder).mcpServers,
	},
	{
		name: "quic",
		want: "[quic] must be a table: a \"[quic]\" line followed by its keys",
		keys: []key{
			{"mode", kindString, "quic.mode must be the string \"intercept\" or \"block\", like mode = \"block\""},
		},
		build: (*builder).quic,
	},
	{
		name:     "forward",
		array:    true,
		notArray: "[[forward]] tables are an array of tables: start each with a \"[[forward]]\" line (two brackets), then its keys",
		want:     "[[forward]] must be tables, each started by a \"[[forward]]\" line, with name and to strings and a port number",
		keys: []key{
			{"name", kindString, "forward.name must be a string, like name = \"db.capsem.internal\""},
			{"port", kindInt, "forward.port must be a whole number, without quotes, like port = 5432"},
			{"to", kindString, "forward.to must be a string, like to = \"127.0.0.1:5432\" or to = \"unix:/run/app.sock\""},
		},
		// Late: a table whose lines hold a reported problem is not also
		// told what it lacks.
		late: (*builder).forwards,
	},
}

// tableNamed returns the table called name (in lower case, as written in
// tables), or nil.
func tableNamed(name string) *table {
	for i := range tables {
		if tables[i].name == name {
			return &tables[i]
		}
	}
	return nil
}

// tableAt returns the table whose path is path, or nil.
func tableAt(path []string) *table {
	for i := range tables {
		if slices.Equal(tables[i].parts(), path) {
			return &tables[i]
		}
	}
	return nil
}

// arrayTableAt returns the array of tables whose path is path, or nil.
func arrayTableAt(path []string) *table {
	if t := tableAt(path); t != nil && t.array {
		return t
	}
	return nil
}

// parts is the path of t.
func (t *table) parts() []string { return strings.Split(t.name, ".") }

// parent is the path of the table that holds t, "" at the top level.
func (t *table) parent() string {
	i := strings.LastIndexByte(t.name, '.')
	if i < 0 {
		return ""
	}
	return t.name[:i]
}

// keyPath is the schema path of t's keys: its name, then ".NAME" for a
// named table. NAME, in capitals, is never a key of the schema.
func (t *table) keyPath() string {
	if t.named {
		return t.name + "." + nameMark
	}
	return t.name
}

// nameMark stands for the name a user chose, in schema paths.
const nameMark = "NAME"

// header is how t is written: "[network]", "[[http]]" for an array of
// tables, "[mcp.servers.NAME]" for a named table.
func (t *table) header() string {
	switch {
	case t.array:
		return "[[" + t.name + "]]"
	case t.named:
		return "[" + t.keyPath() + "]"
	}
	return "[" + t.name + "]"
}

// knownKeys holds, by schema path (a table's keyPath), the keys and tables
// that may follow it in a key path, and at the top level ("") the tables,
// in the order the docs give them.
var knownKeys = func() map[string][]string {
	m := map[string][]string{"": nil}
	for _, t := range tables {
		if p := t.parent(); p == "" {
			m[""] = append(m[""], t.name)
		}
		m[t.keyPath()] = make([]string, 0, len(t.keys))
		for _, k := range t.keys {
			m[t.keyPath()] = append(m[t.keyPath()], k.name)
		}
	}
	for _, t := range tables {
		if p := t.parent(); p != "" {
			m[p] = append(m[p], t.name[len(p)+1:])
		}
	}
	return m
}()

// schemaKeys returns the keys that may follow parent (a schema path) in a
// key path: the table names at the top level (parent ""), a table's keys
// and tables below it, and false below anything else (a map's keys, or a
// named table, where the user chooses the names).
func schemaKeys(parent string) ([]string, bool) {
	keys, ok := knownKeys[parent]
	return keys, ok
}

// schemaStep follows part of a key path from the schema path parent: next
// is the schema path part leads to and spelt how the schema writes part
// ("" when the schema has no such key). Below a named table every part is
// a NAME. known is false when parent is not a table of the schema: what
// follows it is the user's (the keys of a map).
func schemaStep(parent, part string) (next, spelt string, known bool) {
	if t := tableNamed(parent); t != nil && t.named {
		return t.keyPath(), part, true
	}
	keys, ok := schemaKeys(parent)
	if !ok {
		return "", "", false
	}
	spelt = schemaKey(keys, part)
	if spelt == "" {
		return "", "", true
	}
	if parent == "" {
		return spelt, spelt, true
	}
	return parent + "." + spelt, spelt, true
}

// schemaTable returns the table of a schema path: a table's name or
// keyPath.
func schemaTable(path string) *table {
	if t := tableNamed(path); t != nil {
		return t
	}
	if t := tableNamed(strings.TrimSuffix(path, "."+nameMark)); t != nil && t.named {
		return t
	}
	return nil
}

// fieldName is the Go name of the field that holds table or key name (its
// last part) in schemaType; go-toml matches fields by their toml tag, not
// by this name.
func fieldName(name string) string {
	name = name[strings.LastIndexByte(name, '.')+1:]
	return strings.ToUpper(name[:1]) + name[1:]
}

// schemaType is the struct go-toml's strict decoder fills, which reports
// syntax errors, type errors, duplicate keys and unknown keys. A table is a
// pointer to a struct (nil when absent), an array of tables a slice of
// them, a named table a map of them, and a key a field of keyKind.goType.
// A table inside another is a field of its struct. The values are then
// re-read from the syntax tree together with their lines (tomlwalk.go).
var schemaType = structOf("")

// structOf returns the struct of the keys and tables below the table
// called parent ("": the top level).
func structOf(parent string) reflect.Type {
	var fields []reflect.StructField
	if t := tableNamed(parent); t != nil {
		for _, k := range t.keys {
			fields = append(fields, reflect.StructField{Name: fieldName(k.name), Type: k.kind.goType(), Tag: reflect.StructTag(`toml:"` + k.name + `"`)})
		}
	}
	for i := range tables {
		t := &tables[i]
		if t.parent() != parent {
			continue
		}
		tt := structOf(t.name)
		switch {
		case t.array:
			tt = reflect.SliceOf(tt)
		case t.named:
			tt = reflect.MapOf(reflect.TypeFor[string](), tt)
		default:
			tt = reflect.PointerTo(tt)
		}
		last := t.parts()[len(t.parts())-1]
		fields = append(fields, reflect.StructField{Name: fieldName(last), Type: tt, Tag: reflect.StructTag(`toml:"` + last + `"`)})
	}
	return reflect.StructOf(fields)
}

// decoded is the file as go-toml's strict decoder read it: a value of
// schemaType.
type decoded struct{ v reflect.Value }

func newDecoded() decoded { return decoded{reflect.New(schemaType).Elem()} }

// tableValue returns the decoded value of table t: a pointer to its
// struct, a slice of them for an array of tables, a map of them for a
// named table; the zero Value when a table that holds t is absent.
func (d decoded) tableValue(t *table) reflect.Value {
	v := d.v
	for i, part := range t.parts() {
		if i > 0 {
			if v.IsNil() {
				return reflect.Value{}
			}
			v = v.Elem() // a table inside another is in a pointer to its struct
		}
		v = v.FieldByName(fieldName(part))
	}
	return v
}

// value returns the decoded value of key in table t (neither an array of
// tables nor a named table), and whether it was written.
func (d decoded) value(t *table, key string) (reflect.Value, bool) {
	tv := d.tableValue(t)
	if !tv.IsValid() || tv.IsNil() {
		return reflect.Value{}, false
	}
	f := tv.Elem().FieldByName(fieldName(key))
	if f.Kind() == reflect.Pointer {
		if f.IsNil() {
			return reflect.Value{}, false
		}
		return f.Elem(), true
	}
	return f, true
}

// intAt returns the integer at key of t, and whether it was written.
func (d decoded) intAt(t *table, key string) (int64, bool) {
	v, ok := d.value(t, key)
	if !ok {
		return 0, false
	}
	return v.Int(), true
}

// boolAt returns the boolean at key of t, and whether it was written.
func (d decoded) boolAt(t *table, key string) (bool, bool) {
	v, ok := d.value(t, key)
	if !ok {
		return false, false
	}
	return v.Bool(), true
}

// elems returns the elements of an array of tables or the tables of a
// named table (by name), as decoded.
func (d decoded) elems(t *table) []reflect.Value {
	f := d.tableValue(t)
	if !f.IsValid() {
		return nil
	}
	var out []reflect.Value
	switch {
	case t.array:
		for i := range f.Len() {
			out = append(out, f.Index(i))
		}
	case t.named:
		keys := f.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			out = append(out, f.MapIndex(k))
		}
	case !f.IsNil():
		out = append(out, f.Elem())
	}
	return out
}

// stringCounts returns what walker.stringCounts returns, from the decoder's
// side, for tables[ti].
func (d decoded) stringCounts(ti int, cols []int) []int {
	t := &tables[ti]
	instances := d.elems(t)
	rows := len(instances)
	if !t.array && !t.named {
		rows = 1
	}
	want := make([]int, rows*len(cols))
	for i, in := range instances {
		for c, j := range cols {
			switch v := in.Field(j); {
			case v.Kind() == reflect.Pointer:
				if !v.IsNil() {
					want[i*len(cols)+c] = 1
				}
			case v.Kind() == reflect.Map && v.Type().Elem().Kind() == reflect.Slice:
				// kindStringLists: the strings of every list.
				for it := v.MapRange(); it.Next(); {
					want[i*len(cols)+c] += it.Value().Len()
				}
			default:
				want[i*len(cols)+c] = v.Len()
			}
		}
	}
	return want
}
