package pricing

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

//go:embed prices.json
var pricesJSON []byte

// Tier is a price that applies to every token of a request once the request's
// input tokens (cached ones included) exceed Start.
type Tier struct {
	Start int64   `json:"start"`
	Price float64 `json:"price"`
}

// Price is a price in USD per million tokens, with optional long-context
// tiers.
type Price struct {
	Base  float64
	Tiers []Tier // sorted by Start
	Set   bool   // the table has this price
}

// UnmarshalJSON accepts a number or {"base": n, "tiers": [...]}.
func (p *Price) UnmarshalJSON(b []byte) error {
	var n float64
	if err := json.Unmarshal(b, &n); err == nil {
		*p = Price{Base: n, Set: true}
		return nil
	}
	var t struct {
		Base  *float64 `json:"base"`
		Tiers []Tier   `json:"tiers"`
	}
	if err := json.Unmarshal(b, &t); err != nil || t.Base == nil {
		return fmt.Errorf("a price must be a number or {\"base\": n, \"tiers\": [...]}: %s", b)
	}
	for i := 1; i < len(t.Tiers); i++ {
		if t.Tiers[i].Start < t.Tiers[i-1].Start {
			return fmt.Errorf("price tiers out of order: %s", b)
		}
	}
	*p = Price{Base: *t.Base, Tiers: t.Tiers, Set: true}
	return nil
}

// At returns the price per million tokens for a request with inputTokens
// input tokens in all (cached ones included).
func (p Price) At(inputTokens int64) float64 {
	v := p.Base
	for _, t := range p.Tiers {
		if inputTokens > t.Start {
			v = t.Price
		}
	}
	return v
}

// Prices are a model's four token prices.
type Prices struct {
	Input      Price `json:"input"`
	Output     Price `json:"output"`
	CacheRead  Price `json:"cache_read"`
	CacheWrite Price `json:"cache_write"`
}

// Model is a priced model: the table's entry a lookup found, with the prices
// in force at the time of the lookup.
type Model struct {
	Provider string // the table it was found in: anthropic, openai, google
	ID       string // the table's model id
	Prices
}

// Cost returns the cost in USD of a call with in uncached input tokens, out
// output tokens (reasoning included), cacheRead tokens read from the prompt
// cache and cacheWrite tokens written to it. A cache price the table lacks is
// taken to be the input price.
func (m Model) Cost(in, out, cacheRead, cacheWrite int64) float64 {
	total := in + cacheRead + cacheWrite
	input := m.Input.At(total)
	cr, cw := input, input
	if m.CacheRead.Set {
		cr = m.CacheRead.At(total)
	}
	if m.CacheWrite.Set {
		cw = m.CacheWrite.At(total)
	}
	usd := float64(in)*input + float64(out)*m.Output.At(total) + float64(cacheRead)*cr + float64(cacheWrite)*cw
	return usd / 1e6
}

// Info describes the embedded table.
type Info struct {
	Source    string // where the prices came from (package and version)
	Published string // when that source was published, YYYY-MM-DD
	Retrieved string // when the table was generated, YYYY-MM-DD
	Models    int    // models in the table
}

// About describes the embedded table.
func About() Info {
	t := load()
	return t.info
}

// Lookup finds the model a provider's API calls model. provider (anthropic,
// openai or google) is searched first, then the other providers' tables.
func Lookup(provider, model string) (Model, bool) {
	return load().lookup(provider, model, time.Now())
}

// Cost estimates the cost in USD of a call to model: see Model.Cost for the
// token counts. known is false when the model is not in the table; usd is
// then 0.
func Cost(provider, model string, in, out, cacheRead, cacheWrite int64) (usd float64, known bool) {
	m, ok := Lookup(provider, model)
	if !ok {
		return 0, false
	}
	return m.Cost(in, out, cacheRead, cacheWrite), true
}

type entry struct {
	provider string
	id       string
	match    *matcher
	prices   Prices
	changes  []dated
}

type dated struct {
	from   time.Time
	prices Prices
}

// at returns the prices in force at t: the base prices, replaced by each
// change whose date has come, later changes winning.
func (e *entry) at(t time.Time) Prices {
	p := e.prices
	for _, c := range e.changes {
		if !t.Before(c.from) {
			p = c.prices
		}
	}
	return p
}

type table struct {
	info      Info
	providers []string // in file order (sorted)
	entries   map[string][]*entry
	err       error
}

var load = sync.OnceValue(func() *table {
	t, err := parse(pricesJSON)
	if err != nil {
		// The table is embedded and tested; this is a build that shipped a
		// broken file. Costs are then unknown, never a crash.
		slog.Error("pricing: the embedded price table is unreadable; costs will not be estimated", "err", err)
		return &table{err: err, entries: map[string][]*entry{}}
	}
	return t
})

func parse(b []byte) (*table, error) {
	var f struct {
		Source          string `json:"source"`
		SourcePublished string `json:"source_published"`
		Retrieved       string `json:"retrieved"`
		Providers       map[string][]struct {
			ID    string          `json:"id"`
			Match json.RawMessage `json:"match"`
			Prices
			Changes []struct {
				From string `json:"from"`
				Prices
			} `json:"changes"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	t := &table{
		info:    Info{Source: f.Source, Published: f.SourcePublished, Retrieved: f.Retrieved},
		entries: map[string][]*entry{},
	}
	for _, p := range []string{"anthropic", "openai", "google"} {
		if _, ok := f.Providers[p]; ok {
			t.providers = append(t.providers, p)
		}
	}
	for p := range f.Providers {
		if p != "anthropic" && p != "openai" && p != "google" {
			t.providers = append(t.providers, p)
		}
	}
	for p, models := range f.Providers {
		for _, m := range models {
			if m.ID == "" {
				return nil, fmt.Errorf("%s: a model without an id", p)
			}
			e := &entry{provider: p, id: strings.ToLower(m.ID), prices: m.Prices}
			if len(m.Match) > 0 {
				mt, err := compileMatch(m.Match)
				if err != nil {
					return nil, fmt.Errorf("%s/%s: %w", p, m.ID, err)
				}
				e.match = mt
			}
			for _, c := range m.Changes {
				from, err := time.Parse("2006-01-02", c.From)
				if err != nil {
					return nil, fmt.Errorf("%s/%s: change date: %w", p, m.ID, err)
				}
				e.changes = append(e.changes, dated{from: from, prices: c.Prices})
			}
			t.entries[p] = append(t.entries[p], e)
			t.info.Models++
		}
	}
	return t, nil
}

// normalize lowers a model name and returns it with and without a path
// prefix such as "models/" (Gemini) or "openai/".
func normalize(model string) (full, base string) {
	full = strings.ToLower(strings.TrimSpace(model))
	base = full
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	return full, base
}

func (t *table) order(provider string) []string {
	order := make([]string, 0, len(t.providers)+1)
	if _, ok := t.entries[provider]; ok {
		order = append(order, provider)
	}
	for _, p := range t.providers {
		if p != provider {
			order = append(order, p)
		}
	}
	return order
}

func (t *table) lookup(provider, model string, now time.Time) (Model, bool) {
	full, base := normalize(model)
	if base == "" {
		return Model{}, false
	}
	order := t.order(strings.ToLower(provider))
	names := []string{full}
	if base != full {
		names = append(names, base)
	}
	// The source's match rules, the most specific match winning.
	for _, p := range order {
		var best *entry
		bestScore := -1
		for _, name := range names {
			for _, e := range t.entries[p] {
				if e.match == nil {
					if e.id == name && bestScore < exactScore {
						best, bestScore = e, exactScore
					}
					continue
				}
				if ok, s := e.match.eval(name); ok && s > bestScore {
					best, bestScore = e, s
				}
			}
			if best != nil {
				return Model{Provider: p, ID: best.id, Prices: best.at(now)}, true
			}
		}
	}
	// The longest model id that is a prefix of the name.
	for _, p := range order {
		var best *entry
		for _, e := range t.entries[p] {
			if hasPrefixAtBoundary(base, e.id) && (best == nil || len(e.id) > len(best.id)) {
				best = e
			}
		}
		if best != nil {
			return Model{Provider: p, ID: best.id, Prices: best.at(now)}, true
		}
	}
	return Model{}, false
}

func hasPrefixAtBoundary(name, prefix string) bool {
	if !strings.HasPrefix(name, prefix) {
		return false
	}
	if len(name) == len(prefix) {
		return true
	}
	return strings.IndexByte("-.@:_", name[len(prefix)]) >= 0
}

// exactScore ranks an "equals" match above any prefix or pattern match.
const exactScore = 1 << 20

// matcher is one node of the source's match logic.
type matcher struct {
	op   string // equals, starts_with, ends_with, contains, regex, not, or, and
	s    string
	re   *regexp.Regexp
	kids []*matcher
}

func compileMatch(raw json.RawMessage) (*matcher, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("match: %w", err)
	}
	if len(m) != 1 {
		return nil, fmt.Errorf("match: want one operator, got %d", len(m))
	}
	for op, v := range m {
		switch op {
		case "equals", "starts_with", "ends_with", "contains", "regex":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("match %s: %w", op, err)
			}
			mt := &matcher{op: op, s: strings.ToLower(s)}
			if op == "regex" {
				re, err := regexp.Compile(s)
				if err != nil {
					return nil, fmt.Errorf("match regex: %w", err)
				}
				mt.re = re
				mt.s, _ = re.LiteralPrefix()
			}
			return mt, nil
		case "not":
			k, err := compileMatch(v)
			if err != nil {
				return nil, err
			}
			return &matcher{op: op, kids: []*matcher{k}}, nil
		case "or", "and":
			var arr []json.RawMessage
			if err := json.Unmarshal(v, &arr); err != nil {
				return nil, fmt.Errorf("match %s: %w", op, err)
			}
			mt := &matcher{op: op}
			for _, a := range arr {
				k, err := compileMatch(a)
				if err != nil {
					return nil, err
				}
				mt.kids = append(mt.kids, k)
			}
			return mt, nil
		default:
			return nil, fmt.Errorf("match: unknown operator %q", op)
		}
	}
	return nil, errors.New("match: empty")
}

// eval reports whether name matches and how specific the match is: the
// length of the literal text that matched, exact matches ranking highest.
func (m *matcher) eval(name string) (bool, int) {
	switch m.op {
	case "equals":
		return name == m.s, exactScore + len(m.s)
	case "starts_with":
		return strings.HasPrefix(name, m.s), len(m.s)
	case "ends_with":
		return strings.HasSuffix(name, m.s), len(m.s)
	case "contains":
		return strings.Contains(name, m.s), len(m.s)
	case "regex":
		return m.re.MatchString(name), len(m.s)
	case "not":
		ok, _ := m.kids[0].eval(name)
		return !ok, 0
	case "or":
		best, any := 0, false
		for _, k := range m.kids {
			if ok, s := k.eval(name); ok {
				any = true
				best = max(best, s)
			}
		}
		return any, best
	case "and":
		best := 0
		for _, k := range m.kids {
			ok, s := k.eval(name)
			if !ok {
				return false, 0
			}
			best = max(best, s)
		}
		return len(m.kids) > 0, best
	}
	return false, 0
}
