package policy

import (
	"fmt"
	"strings"
	"testing"
)

// benchPolicy has 10,000 exact allow entries, 1,000 wildcards and 1,000
// deny entries: decisions must not slow down with the number of rules.
func benchPolicy(b *testing.B) *Policy {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("[network]\nallow = [\n")
	for i := range 10000 {
		fmt.Fprintf(&sb, "  \"host%d.example%d.test\",\n", i, i%97)
	}
	for i := range 1000 {
		fmt.Fprintf(&sb, "  \"*.cdn%d.test\",\n", i)
	}
	sb.WriteString("]\ndeny = [\n")
	for i := range 1000 {
		fmt.Fprintf(&sb, "  \"bad%d.cdn%d.test\",\n", i, i)
	}
	sb.WriteString("]\n")
	p, err := Parse("bench.toml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkDecide(b *testing.B) {
	p := benchPolicy(b)
	cases := []struct {
		name  string
		host  string
		port  uint16
		allow bool
	}{
		{"exact", "host5000.example53.test", 443, true},
		{"exact-upper-dot", "HOST5000.Example53.TEST.", 443, true},
		{"wildcard-deep", "a.b.c.d.cdn500.test", 443, true},
		{"denied", "bad500.cdn500.test", 443, false},
		{"miss", "nothing.at.all.example.org", 443, false},
		{"wrong-port", "host5000.example53.test", 80, false},
	}
	for _, c := range cases {
		b.Run("flow/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p.DecideFlow(c.host, c.port).Allowed != c.allow {
					b.Fatal("wrong decision")
				}
			}
		})
	}
	b.Run("name/wildcard-deep", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !p.DecideName("a.b.c.d.cdn500.test").Allowed {
				b.Fatal("wrong decision")
			}
		}
	})
	b.Run("flow/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !p.DecideFlow("x.cdn700.test", 443).Allowed {
					b.Fatal("wrong decision")
				}
			}
		})
	})
}

func BenchmarkParse(b *testing.B) {
	data := []byte(matchPolicy)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("bench.toml", data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecideHTTP(b *testing.B) {
	p, err := Parse("bench.toml", []byte(httpPolicy))
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name, host, method, path string
		allow                    bool
	}{
		{"plain-allow", "api.github.com", "GET", "/repos/capsem/capsem/pulls", true},
		{"catch-all-deny", "api.github.com", "POST", "/repos/capsem/capsem/pulls", false},
		{"no-rule", "y.corp.test", "GET", "/a/b/c", true},
		{"traversal", "api.github.com", "GET", "/repos/%2e%2e/admin", false},
		{"ambiguous", "api.github.com", "GET", "/repos/..%2Fadmin", false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p.DecideHTTP(c.host, c.method, c.path).Allowed != c.allow {
					b.Fatal("wrong decision")
				}
			}
		})
	}
}
