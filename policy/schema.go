package policy

// The tables and keys of a policy file (doc.go draws a whole file):
//
//	[network]   default allow deny
//	[upstream]  resolve ca_files allow_private
//	[[http]]    host methods paths action        (an array of tables)
//	[tls]       passthrough
//	[mitm]      preview_bytes
//	[dns]       max_wildcard_names
//	[[secret]]  name from_env from_file hosts placeholder   (an array of tables)
//	[dlp]       action detectors allow_hosts
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
	"strings"
)

// keyKind is the TOML type of a key's value.
type keyKind int

const (
	kindString    keyKind = iota // "x"
	kindStrings                  // ["x", "y"]
	kindStringMap                // { "k" = "v" }
	kindBool                     // true
	kindInt                      // 4096
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
	case kindBool:
		return reflect.TypeFor[*bool]()
	}
	return reflect.TypeFor[*int64]()
}

// holdsStrings reports whether the walker reads the values of a key of
// kind k as string leaves (the other kinds it leaves to the decoder).
func (k keyKind) holdsStrings() bool {
	return k == kindString || k == kindStrings || k == kindStringMap
}

// key is one key of a table.
type key struct {
	name string
	kind keyKind
	want string // what its value must be, told to a user who wrote another type
}

// table is one table of the policy file.
type table struct {
	name string
	// array: the table is an array of tables, each element started by a
	// "[[name]]" line (or written inline: name = [{ … }, { … }]).
	array bool
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
		want:     "[[secret]] must be tables, each started by a \"[[secret]]\" line, with name, from_env or from_file, and placeholder strings and a hosts array of strings",
		keys: []key{
			{"name", kindString, "secret.name must be a string, like name = \"ANTHROPIC_API_KEY\""},
			{"from_env", kindString, "secret.from_env must be a string, like from_env = \"ANTHROPIC_API_KEY\""},
			{"from_file", kindString, "secret.from_file must be a path string, like from_file = \"~/.config/anthropic.key\""},
			{"hosts", kindStrings, "secret.hosts must be an array of strings, like hosts = [\"api.anthropic.com\"]"},
			{"placeholder", kindString, "secret.placeholder must be a string, like placeholder = \"capsem-placeholder-anthropic\""},
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
		},
		build: (*builder).dlpTable,
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

// arrayTable returns the array of tables called name, or nil.
func arrayTable(name string) *table {
	if t := tableNamed(name); t != nil && t.array {
		return t
	}
	return nil
}

// header is how t is written: "[network]", or "[[http]]" for an array of
// tables.
func (t *table) header() string {
	if t.array {
		return "[[" + t.name + "]]"
	}
	return "[" + t.name + "]"
}

// knownKeys holds the keys that may follow each table in a key path, and
// at the top level ("") the tables, in the order the docs give them.
var knownKeys = func() map[string][]string {
	m := map[string][]string{}
	for _, t := range tables {
		m[""] = append(m[""], t.name)
		m[t.name] = make([]string, 0, len(t.keys))
		for _, k := range t.keys {
			m[t.name] = append(m[t.name], k.name)
		}
	}
	return m
}()

// schemaKeys returns the keys that may follow parent in a key path: the
// table names at the top level (parent ""), a table's keys below it, and
// false below anything else.
func schemaKeys(parent string) ([]string, bool) {
	keys, ok := knownKeys[parent]
	return keys, ok
}

// fieldName is the Go name of the field that holds table or key name in
// schemaType; go-toml matches fields by their toml tag, not by this name.
func fieldName(name string) string {
	return strings.ToUpper(name[:1]) + name[1:]
}

// schemaType is the struct go-toml's strict decoder fills, which reports
// syntax errors, type errors, duplicate keys and unknown keys. A table is a
// pointer to a struct (nil when absent), an array of tables a slice of
// them, and a key a field of keyKind.goType. The values are then re-read
// from the syntax tree together with their lines (tomlwalk.go).
var schemaType = func() reflect.Type {
	top := make([]reflect.StructField, len(tables))
	for i, t := range tables {
		fields := make([]reflect.StructField, len(t.keys))
		for j, k := range t.keys {
			fields[j] = reflect.StructField{Name: fieldName(k.name), Type: k.kind.goType(), Tag: reflect.StructTag(`toml:"` + k.name + `"`)}
		}
		tt := reflect.StructOf(fields)
		if t.array {
			tt = reflect.SliceOf(tt)
		} else {
			tt = reflect.PointerTo(tt)
		}
		top[i] = reflect.StructField{Name: fieldName(t.name), Type: tt, Tag: reflect.StructTag(`toml:"` + t.name + `"`)}
	}
	return reflect.StructOf(top)
}()

// decoded is the file as go-toml's strict decoder read it: a value of
// schemaType.
type decoded struct{ v reflect.Value }

func newDecoded() decoded { return decoded{reflect.New(schemaType).Elem()} }

// value returns the decoded value of key in table t (not an array of
// tables), and whether it was written.
func (d decoded) value(t *table, key string) (reflect.Value, bool) {
	tv := d.v.FieldByName(fieldName(t.name))
	if tv.IsNil() {
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

// stringCounts returns what walker.stringCounts returns, from the decoder's
// side, for tables[ti].
func (d decoded) stringCounts(ti int, cols []int) []int {
	t, f := &tables[ti], d.v.Field(ti)
	var instances []reflect.Value
	switch {
	case t.array:
		for i := range f.Len() {
			instances = append(instances, f.Index(i))
		}
	case !f.IsNil():
		instances = append(instances, f.Elem())
	}
	rows := len(instances)
	if !t.array {
		rows = 1
	}
	want := make([]int, rows*len(cols))
	for i, in := range instances {
		for c, j := range cols {
			if v := in.Field(j); v.Kind() == reflect.Pointer {
				if !v.IsNil() {
					want[i*len(cols)+c] = 1
				}
			} else {
				want[i*len(cols)+c] = v.Len()
			}
		}
	}
	return want
}
