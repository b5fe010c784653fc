package image

import (
	"fmt"
	"io"
	"time"
)

// progress prints a build's steps for a person: "[2/4] what… " when a step
// starts, indented notes under it, and how long each step took. A nil
// progress or writer prints nothing.
type progress struct {
	w         io.Writer
	total, n  int
	start     time.Time
	stepStart time.Time
}

func newProgress(w io.Writer, total int) *progress {
	now := time.Now()
	return &progress{w: w, total: total, start: now, stepStart: now}
}

func (p *progress) printf(format string, a ...any) {
	if p == nil || p.w == nil {
		return
	}
	fmt.Fprintf(p.w, format, a...)
}

// step starts the next step.
func (p *progress) step(format string, a ...any) {
	if p == nil {
		return
	}
	p.n++
	p.stepStart = time.Now()
	p.printf("[%d/%d] %s\n", p.n, p.total, fmt.Sprintf(format, a...))
}

// note is a line under the current step, with the step's elapsed time.
func (p *progress) note(format string, a ...any) {
	if p == nil {
		return
	}
	p.printf("      %s (%s)\n", fmt.Sprintf(format, a...), since(p.stepStart))
}

// total is the closing line.
func (p *progress) finish(format string, a ...any) {
	if p == nil {
		return
	}
	p.printf("%s (%s in all)\n", fmt.Sprintf(format, a...), since(p.start))
}

func since(t time.Time) string {
	d := time.Since(t)
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
