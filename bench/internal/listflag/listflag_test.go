package listflag

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		why  string
	}{
		{"direct,gateway", []string{"direct", "gateway"}, "items in the order given"},
		{" h1 , h2 ", []string{"h1", "h2"}, "spaces around an item are not part of it"},
		{"dl,,lat,", []string{"dl", "lat"}, "empty items (a doubled or trailing comma) are dropped"},
		{"", nil, "an empty flag names nothing"},
	} {
		if got := Split(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Split(%q) = %q, want %q: %s", c.in, got, c.want, c.why)
		}
	}
}

func TestHas(t *testing.T) {
	for _, c := range []struct {
		list, what string
		want       bool
		why        string
	}{
		{"dl,ul", "ul", true, "a listed item"},
		{"dl, ul ", "ul", true, "a listed item with spaces around it"},
		{"dl,ul", "u", false, "a prefix of an item is not the item"},
		{"", "lat", false, "an empty list has nothing"},
	} {
		if got := Has(c.list, c.what); got != c.want {
			t.Errorf("Has(%q, %q) = %v, want %v: %s", c.list, c.what, got, c.want, c.why)
		}
	}
}
