// Command ocsfschema compiles OCSF event classes from the ocsf-schema *source* tree
// (dictionary.json, categories.json, events/, objects/, profiles/) into
// standalone JSON Schema (draft-07) documents, one per class.
//
// Resolution follows the upstream ocsf-schema-compiler (Python) for the parts
// that affect validation, and the output shape follows ocsf-server's
// lib/schema/json_schema.ex. Standard library only.
//
// Usage:
//
//	go run ./tools/ocsfschema -src /tmp/ocsf-src -out store/ocsf/testdata/ocsf-1.8.0 \
//	    file_activity process_activity network_activity http_activity dns_activity
//
// It made the schemas store/ocsf's tests validate against; their
// PROVENANCE.md says from what. It must never be needed to build or test
// capsem: the schemas are committed.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

type obj = map[string]any

type compiler struct {
	src      string
	dict     obj            // dictionary attributes
	types    obj            // dictionary types
	cats     obj            // categories
	classes  map[string]obj // by name
	objects  map[string]obj // by name
	resolved map[string]bool
}

func main() {
	src := flag.String("src", "", "extracted ocsf-schema source tree")
	out := flag.String("out", "schemas", "output directory")
	open := flag.Bool("open", false, `emit "additionalProperties": true (ocsf-server emits false)`)
	flag.Parse()
	if *src == "" || flag.NArg() == 0 {
		log.Fatal("usage: gen -src DIR [-out DIR] [-open] class_name...")
	}
	c := &compiler{src: *src, classes: map[string]obj{}, objects: map[string]obj{}, resolved: map[string]bool{}}
	version := c.load()
	c.resolveAll()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	for _, name := range flag.Args() {
		cls, ok := c.classes[name]
		if !ok {
			log.Fatalf("unknown class %q", name)
		}
		s := c.classSchema(name, cls, !*open)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf) // maps are encoded with sorted keys
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			log.Fatal(err)
		}
		path := filepath.Join(*out, fmt.Sprintf("ocsf-%s-%s.schema.json", version, name))
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s class_uid=%v required=%v\n", path, cls["uid"], s["required"])
	}
}

// ---------- loading ----------

func readJSON(path string) obj {
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var o obj
	if err := json.Unmarshal(b, &o); err != nil {
		log.Fatalf("%s: %v", path, err)
	}
	return o
}

func (c *compiler) load() string {
	version, _ := readJSON(filepath.Join(c.src, "version.json"))["version"].(string)
	d := readJSON(filepath.Join(c.src, "dictionary.json"))
	c.dict = d["attributes"].(obj)
	c.types = d["types"].(obj)["attributes"].(obj)
	c.cats = readJSON(filepath.Join(c.src, "categories.json"))["attributes"].(obj)
	for dir, into := range map[string]map[string]obj{"events": c.classes, "objects": c.objects} {
		err := filepath.WalkDir(filepath.Join(c.src, dir), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json") {
				return err
			}
			item := readJSON(p)
			c.resolveIncludes(item)
			into[item["name"].(string)] = item
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	// Dictionary attributes whose type is not a dictionary type name an object.
	for _, a := range c.dict {
		a := a.(obj)
		if t := a["type"].(string); c.types[t] == nil {
			a["type"], a["object_type"] = "object_t", t
		}
	}
	return version
}

func attrs(item obj) obj {
	a, _ := item["attributes"].(obj)
	if a == nil {
		a = obj{}
		item["attributes"] = a
	}
	return a
}

// resolveIncludes handles "attributes": {"$include": [...]} (profiles) and
// per-attribute "$include" (shared enum files). Own attributes win.
func (c *compiler) resolveIncludes(item obj) {
	for _, v := range attrs(item) {
		if a, ok := v.(obj); ok {
			if p, has := a["profile"]; has { // legacy "profile"; null = never profile-gated
				a["profiles"] = []any{p}
				if p == nil {
					a["profiles"] = nil
				}
				delete(a, "profile")
			}
		}
	}
	if inc, ok := attrs(item)["$include"]; ok {
		delete(attrs(item), "$include")
		files, isList := inc.([]any)
		if !isList {
			files = []any{inc}
		}
		for _, f := range files {
			in := readJSON(filepath.Join(c.src, f.(string)))
			base := deepCopy(attrs(in)).(obj)
			ann, _ := in["annotations"].(obj)
			for _, a := range base {
				a := a.(obj)
				if in["meta"] == "profile" {
					a["profiles"] = []any{in["name"]}
				}
				for k, v := range ann {
					if _, ok := a[k]; !ok {
						a[k] = v
					}
				}
			}
			mergeAttrs(base, attrs(item))
			item["attributes"] = base
		}
	}
	for name, a := range attrs(item) {
		a := a.(obj)
		if f, ok := a["$include"].(string); ok {
			delete(a, "$include")
			merged := readJSON(filepath.Join(c.src, f))
			deepMerge(merged, a)
			attrs(item)[name] = merged
		}
	}
}

// ---------- resolution ----------

func (c *compiler) resolveAll() {
	for name := range c.objects {
		c.extend(c.objects, "object:", name)
	}
	for name := range c.classes {
		c.extend(c.classes, "class:", name)
	}
	for name, cls := range c.classes {
		if name != "base_event" && cls["uid"] == nil { // abstract category classes
			delete(c.classes, name)
			continue
		}
		c.enrichClass(cls)
	}
	c.observableEnum()
	for _, group := range []map[string]obj{c.classes, c.objects} {
		for _, item := range group {
			c.addDatetimeSiblings(item)
			c.finish(item)
		}
	}
}

// extend flattens "extends": the child is merged on top of a copy of its parent.
func (c *compiler) extend(items map[string]obj, kind, name string) {
	if c.resolved[kind+name] {
		return
	}
	item := items[name]
	if parent, _ := item["extends"].(string); parent != "" && parent != name {
		if items[parent] == nil {
			log.Fatalf("%s extends unknown %s", name, parent)
		}
		c.extend(items, kind, parent)
		merged := deepCopy(items[parent]).(obj)
		for k, v := range item {
			switch k {
			case "attributes":
				mergeAttrs(attrs(merged), v.(obj))
			case "profiles":
				merged[k] = union(merged[k], v)
			default:
				merged[k] = v
			}
		}
		items[name] = merged
	}
	c.resolved[kind+name] = true
}

// mergeAttrs merges src attribute details on top of dst (src wins).
func mergeAttrs(dst, src obj) {
	for name, s := range src {
		d, ok := dst[name].(obj)
		if !ok {
			dst[name] = s
			continue
		}
		for k, v := range s.(obj) {
			dv, exists := d[k]
			switch {
			case !exists:
				d[k] = v
			case k == "profiles":
				if v == nil || dv == nil {
					d[k] = v
				} else {
					d[k] = union(dv, v)
				}
			case k == "requirement" && s.(obj)["profiles"] != nil && d["profiles"] != nil:
				// attribute governed by two profiles: keep the stronger requirement
				if rank(v) > rank(dv) {
					d[k] = v
				}
			default:
				dm, ok1 := dv.(obj)
				sm, ok2 := v.(obj)
				if ok1 && ok2 {
					deepMerge(dm, sm)
				} else {
					d[k] = v
				}
			}
		}
	}
}

func rank(r any) int {
	return map[any]int{"optional": 1, "recommended": 2, "required": 3}[r]
}

// enrichClass sets class_uid, category_uid and type_uid enums.
func (c *compiler) enrichClass(cls obj) {
	a := attrs(cls)
	catUID := 0
	if cat, ok := c.cats[cls["category"].(string)].(obj); ok {
		catUID = int(cat["uid"].(float64))
		a["category_uid"].(obj)["enum"] = obj{strconv.Itoa(catUID): obj{"caption": cat["caption"]}}
	}
	uid := catUID*1000 + int(num(cls["uid"]))
	cls["uid"] = uid
	a["class_uid"].(obj)["enum"] = obj{strconv.Itoa(uid): obj{"caption": cls["caption"]}}
	typeEnum := obj{strconv.Itoa(uid * 100): obj{"caption": "Unknown"}}
	for k, v := range a["activity_id"].(obj)["enum"].(obj) {
		id, err := strconv.Atoi(k)
		if err != nil {
			log.Fatalf("%s: bad activity_id %q", cls["name"], k)
		}
		typeEnum[strconv.Itoa(uid*100+id)] = v
	}
	a["type_uid"].(obj)["enum"] = typeEnum
}

func num(v any) float64 { f, _ := v.(float64); return f }

// observableEnum adds every observable type_id declared anywhere in the source
// (dictionary types/attributes, objects, class attributes, class "observables")
// to observable.type_id, as the upstream compiler does.
func (c *compiler) observableEnum() {
	enum := attrs(c.objects["observable"])["type_id"].(obj)["enum"].(obj)
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case obj:
			for k, x := range t {
				if f, ok := x.(float64); ok && k == "observable" {
					enum[strconv.Itoa(int(f))] = obj{}
				}
				if m, ok := x.(obj); ok && k == "observables" {
					for _, id := range m {
						if f, ok := id.(float64); ok { // path -> type_id map
							enum[strconv.Itoa(int(f))] = obj{}
						}
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(c.types)
	walk(c.dict)
	for _, group := range []map[string]obj{c.classes, c.objects} {
		for _, item := range group {
			walk(item)
		}
	}
}

// addDatetimeSiblings adds "<name>_dt" (datetime_t, optional) next to every
// timestamp_t attribute when the schema defines the datetime profile.
func (c *compiler) addDatetimeSiblings(item obj) {
	if c.types["datetime_t"] == nil {
		return
	}
	if _, err := os.Stat(filepath.Join(c.src, "profiles", "datetime.json")); err != nil {
		return
	}
	a := attrs(item)
	for name, v := range a {
		t, _ := v.(obj)["type"].(string)
		if t == "" {
			t, _ = c.dict[name].(obj)["type"].(string)
		}
		if t == "timestamp_t" && !strings.HasSuffix(name, "_dt") {
			dt := deepCopy(v).(obj)
			dt["type"], dt["requirement"], dt["profiles"] = "datetime_t", "optional", []any{"datetime"}
			a[name+"_dt"] = dt
		}
	}
}

// finish merges each attribute on top of its dictionary definition.
func (c *compiler) finish(item obj) {
	a := attrs(item)
	for name, v := range a {
		d, ok := c.dict[name].(obj)
		if !ok && strings.HasSuffix(name, "_dt") {
			d, ok = c.dict[strings.TrimSuffix(name, "_dt")].(obj)
		}
		if !ok {
			log.Fatalf("%s.%s: not in dictionary", item["name"], name)
		}
		full := deepCopy(d).(obj)
		deepMerge(full, v.(obj))
		a[name] = full
	}
}

// ---------- JSON Schema output ----------

func (c *compiler) classSchema(name string, cls obj, closed bool) obj {
	s := c.itemSchema(cls, closed, true)
	s["$schema"] = "http://json-schema.org/draft-07/schema#"
	s["$id"] = "https://schema.ocsf.io/schema/classes/" + name
	defs := obj{}
	queue := c.refs(cls)
	for len(queue) > 0 {
		o := queue[0]
		queue = queue[1:]
		if defs[o] != nil {
			continue
		}
		defs[o] = c.itemSchema(c.objects[o], closed, false)
		queue = append(queue, c.refs(c.objects[o])...)
	}
	s["$defs"] = defs
	return s
}

func (c *compiler) refs(item obj) (out []string) {
	for _, a := range attrs(item) {
		if t, ok := a.(obj)["object_type"].(string); ok {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// itemSchema encodes a class or object. Attributes that a profile makes
// required are only required (in classes) when metadata.profiles names one of
// their profiles; in objects they are left optional.
func (c *compiler) itemSchema(item obj, closed, isClass bool) obj {
	props, required, anyOf, oneOf, allOf := obj{}, []string{}, []any{}, []any{}, []any{}
	cons, _ := item["constraints"].(obj)
	justOne, atLeastOne := strs(cons["just_one"]), strs(cons["at_least_one"])
	for _, name := range slices.Sorted(maps.Keys(attrs(item))) {
		a := attrs(item)[name].(obj)
		props[name] = c.attrSchema(name, a)
		switch {
		case slices.Contains(justOne, name):
			others := slices.DeleteFunc(slices.Clone(justOne), func(o string) bool { return o == name })
			oneOf = append(oneOf, obj{"required": []string{name}, "not": obj{"required": others}})
		case slices.Contains(atLeastOne, name):
			anyOf = append(anyOf, obj{"required": []string{name}})
		case a["requirement"] != "required":
		case a["profiles"] == nil:
			required = append(required, name)
		case isClass:
			applied := obj{"properties": obj{"profiles": obj{"contains": obj{"enum": a["profiles"]}}},
				"required": []string{"profiles"}}
			allOf = append(allOf, obj{"if": obj{"properties": obj{"metadata": applied}, "required": []string{"metadata"}},
				"then": obj{"required": []string{name}}})
		}
	}
	s := obj{"title": item["caption"], "type": "object", "properties": props,
		"additionalProperties": !closed || len(props) == 0}
	for k, v := range map[string][]any{"anyOf": anyOf, "oneOf": oneOf, "allOf": allOf} {
		if len(v) > 0 {
			s[k] = v
		}
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func (c *compiler) attrSchema(name string, a obj) obj {
	t := a["type"].(string)
	s := obj{}
	switch t {
	case "object_t":
		s["$ref"] = "#/$defs/" + a["object_type"].(string)
	case "json_t": // any JSON value
	default:
		base := t
		if bt, ok := c.types[t].(obj)["type"].(string); ok {
			base = bt
		}
		jt := map[string]string{"string_t": "string", "integer_t": "integer",
			"long_t": "integer", "float_t": "number", "boolean_t": "boolean"}[base]
		if jt == "" {
			log.Fatalf("attribute %s: unsupported type %s", name, t)
		}
		s["type"] = jt
		if e, ok := a["enum"].(obj); ok && (jt == "integer" || jt == "string") {
			vals := []any{}
			for _, k := range slices.Sorted(maps.Keys(e)) {
				vals = append(vals, k)
			}
			if jt == "integer" {
				for i, k := range vals {
					n, err := strconv.Atoi(k.(string))
					if err != nil {
						log.Fatalf("attribute %s: non-integer enum key %q", name, k)
					}
					vals[i] = n
				}
				slices.SortFunc(vals, func(x, y any) int { return x.(int) - y.(int) })
			}
			if len(vals) == 1 {
				s["const"] = vals[0]
			} else {
				s["enum"] = vals
			}
		}
	}
	if a["is_array"] == true {
		s = obj{"type": "array", "items": s}
	}
	s["title"] = a["caption"]
	return s
}

// ---------- helpers ----------

func strs(v any) (out []string) {
	l, _ := v.([]any)
	for _, x := range l {
		out = append(out, x.(string))
	}
	slices.Sort(out)
	return out
}

func union(a, b any) any {
	all := append(strs(a), strs(b)...)
	slices.Sort(all)
	out := []any{}
	for _, x := range slices.Compact(all) {
		out = append(out, x)
	}
	return out
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case obj:
		m := make(obj, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = deepCopy(x)
		}
		return l
	}
	return v
}

// deepMerge merges src into dst recursively; lists and scalars are replaced.
func deepMerge(dst, src obj) {
	for k, v := range src {
		dm, ok1 := dst[k].(obj)
		sm, ok2 := v.(obj)
		if ok1 && ok2 {
			deepMerge(dm, sm)
		} else {
			dst[k] = v
		}
	}
}
