package ui

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// filter is what a timeline shows: the query parameters of a session page
// and of its rows (kind may repeat; none means every kind).
type filter struct {
	Kinds    []string
	Decision string // allowed, denied, or "" for both
	Host     string // a host, or a suffix of one after a dot
	Q        string // text anywhere in the row, any case
	After    uint64 // only events after this sequence number
}

func parseFilter(v url.Values) filter {
	f := filter{Decision: v.Get("decision"), Host: strings.TrimSpace(v.Get("host")), Q: strings.TrimSpace(v.Get("q"))}
	for _, k := range v["kind"] {
		if slices.Contains(rowKinds, k) && !slices.Contains(f.Kinds, k) {
			f.Kinds = append(f.Kinds, k)
		}
	}
	if f.Decision != "allowed" && f.Decision != "denied" {
		f.Decision = ""
	}
	f.After, _ = strconv.ParseUint(v.Get("after"), 10, 64)
	return f
}

// query is f as query parameters, without After.
func (f filter) query() url.Values {
	v := url.Values{}
	for _, k := range f.Kinds {
		v.Add("kind", k)
	}
	if f.Decision != "" {
		v.Set("decision", f.Decision)
	}
	if f.Host != "" {
		v.Set("host", f.Host)
	}
	if f.Q != "" {
		v.Set("q", f.Q)
	}
	return v
}

func (f filter) HasKind(k string) bool { return slices.Contains(f.Kinds, k) }

// any says whether f filters anything out.
func (f filter) any() bool { return len(f.Kinds) > 0 || f.Decision != "" || f.Host != "" || f.Q != "" }

func (f filter) match(r *row) bool {
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, r.Kind) {
		return false
	}
	if f.Decision != "" && r.Decision != f.Decision {
		return false
	}
	if f.Host != "" {
		h := strings.ToLower(r.Host)
		want := strings.ToLower(f.Host)
		if h != want && !strings.HasSuffix(h, "."+want) {
			return false
		}
	}
	if f.Q != "" && !strings.Contains(r.text(), strings.ToLower(f.Q)) {
		return false
	}
	return true
}
