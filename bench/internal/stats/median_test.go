package stats

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
		why  string
	}{
		{nil, 0, "no samples: zero, not a panic"},
		{[]float64{3}, 3, "one sample is its own median"},
		{[]float64{5, 1, 3}, 3, "odd count: the middle one, whatever the order"},
		{[]float64{4, 1, 3, 2}, 2.5, "even count: the mean of the two middle ones"},
	} {
		in := append([]float64(nil), c.in...)
		if got := Median(in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v: %s", c.in, got, c.want, c.why)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("Median reordered its argument %v: %s", c.in, c.why)
				break
			}
		}
	}
	if got := Median([]time.Duration{4, 1, 3, 2}); got != 2 {
		t.Errorf("durations: %v, want 2 (integer mean of 2 and 3)", got)
	}
}
