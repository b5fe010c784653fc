package stats

import "testing"

func TestPercentile(t *testing.T) {
	v := []int{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p, want int
		why     string
	}{
		{50, 5, "nearest rank: the 5th of 10"},
		{99, 10, "p99 of 10 values is the largest"},
		{1, 1, "p1 is the smallest"},
		{100, 10, "p100 is the largest"},
	} {
		if got := Percentile(v, c.p); got != c.want {
			t.Errorf("Percentile(p%d) = %d, want %d (%s)", c.p, got, c.want, c.why)
		}
	}
	if Percentile([]int(nil), 50) != 0 {
		t.Error("no samples: want 0")
	}
}
