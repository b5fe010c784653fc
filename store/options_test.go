package store

import "testing"

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
		why  string
	}{
		{"0", 0, false, "zero: the default"},
		{"1073741824", 1 << 30, false, "plain bytes"},
		{"1GiB", 1 << 30, false, "the unit the defaults are written in"},
		{"256MiB", 256 << 20, false, ""},
		{"512M", 512 << 20, false, "without iB"},
		{"64k", 64 << 10, false, "lower case"},
		{"2 GB", 2 << 30, false, "a space and B: still powers of 1024"},
		{"off", -1, false, "no limit, no watch"},
		{"-1", -1, false, "negative as in Options"},
		{"-5G", -1, false, "any negative is off"},
		{"1.5G", 0, true, "no fractions: say 1536M"},
		{"1P", 0, true, "an unknown unit"},
		{"", 0, true, "empty"},
		{"G", 0, true, "a unit alone"},
		{"9999999T", 0, true, "overflows int64"},
	} {
		got, err := ParseSize(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d (error: %v): %s", c.in, got, err, c.want, c.bad, c.why)
		}
	}
}
