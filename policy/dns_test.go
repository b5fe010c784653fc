package policy

import (
	"reflect"
	"testing"
)

func TestMaxWildcardNames(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
		why  string
	}{
		{"", DefaultMaxWildcardNames, "no [dns] table: the default"},
		{"[dns]\n", DefaultMaxWildcardNames, "an empty [dns] table: the default"},
		{"[dns]\nmax_wildcard_names = 0\n", DefaultMaxWildcardNames, "0 is documented as the default, not as no names at all"},
		{"[dns]\nmax_wildcard_names = 1\n", 1, "the smallest cap"},
		{"[dns]\nmax_wildcard_names = 100000\n", 100000, "above the fake-DNS pool: addresses are recycled, the cap still counts names"},
		{"dns.max_wildcard_names = 262144\n", MaxMaxWildcardNames, "the largest value, as a dotted key"},
	} {
		if got := mustParse(t, tc.src).MaxWildcardNames(); got != tc.want {
			t.Errorf("%q: MaxWildcardNames() = %d, want %d (%s)", tc.src, got, tc.want, tc.why)
		}
	}
	if DenyAll().MaxWildcardNames() != DefaultMaxWildcardNames || (*Policy)(nil).MaxWildcardNames() != DefaultMaxWildcardNames {
		t.Error("DenyAll and a nil policy must have the default cap")
	}
}

func TestMaxWildcardNamesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
		why       string
	}{
		{"negative", "[dns]\n\nmax_wildcard_names = -1\n",
			[]string{`p.toml:3: dns.max_wildcard_names = -1: write a number of names from 1 to 262144, or 0 for the default (4096)`},
			"a negative cap means nothing"},
		{"too big", "[dns]\nmax_wildcard_names = 262145\n",
			[]string{`p.toml:2: dns.max_wildcard_names = 262145: write a number of names from 1 to 262144, or 0 for the default (4096)`},
			"the table of names seen is bounded by the cap: keep it bounded"},
		{"string", "[dns]\nmax_wildcard_names = \"4096\"\n",
			[]string{`p.toml:2: dns.max_wildcard_names must be a whole number of names, without quotes, like max_wildcard_names = 4096; found a string`},
			"a quoted number is a type error, said plainly"},
		{"unknown key", "[dns]\nmax_wildcard = 1\n",
			[]string{`p.toml:2: unknown key "max_wildcard" in [dns]: the keys of [dns] are max_wildcard_names; remove or rename it`},
			"typos are errors, not silently ignored"},
		{"wrong table", "[network]\nmax_wildcard_names = 1\n",
			[]string{`p.toml:2: key "max_wildcard_names" belongs in the [dns] table, not in [network]; move it under a "[dns]" line`},
			"the key in the wrong table is pointed to the right one"},
		{"array table", "[[dns]]\n",
			[]string{`p.toml:1: [dns] must be a table: a "[dns]" line followed by its keys; found an array table`},
			"[[dns]] is not [dns]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("p.toml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v (%s)", p, tc.why)
			}
			if got := errLines(err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("error:\n got  %q\n want %q (%s)", got, tc.want, tc.why)
			}
		})
	}
}
