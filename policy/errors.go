package policy

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// maxErrors caps the number of problems one Parse reports.
const maxErrors = 50

// Error is one problem in a policy file. Its message starts with
// "file:line: " and says what to do about the problem. Parse returns a
// single *Error, or several joined with errors.Join (one per line of the
// error's text); errors.As finds the first.
type Error struct {
	File string // the name given to Parse, or the path given to Load
	Line int    // 1-based line of the offending key or value
	Msg  string // what is wrong and how to fix it (one line)
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// collector gathers the problems of one file.
type collector struct {
	file string
	errs []*Error
}

func (c *collector) add(line int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	// Keep "one problem, one line": nothing the user wrote may break that.
	msg = strings.ReplaceAll(msg, "\r", " ")
	msg = strings.ReplaceAll(msg, "\n", " ")
	if line < 1 {
		line = 1
	}
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Msg: msg})
}

// reportedIn reports whether a problem was added on a line from start up
// to, not including, end.
func (c *collector) reportedIn(start, end int) bool {
	for _, e := range c.errs {
		if e.Line >= start && e.Line < end {
			return true
		}
	}
	return false
}

// err returns the problems sorted by line (the first maxErrors of them),
// or nil when there are none.
func (c *collector) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	sort.SliceStable(c.errs, func(i, j int) bool { return c.errs[i].Line < c.errs[j].Line })
	errs := c.errs
	if len(errs) > maxErrors {
		errs = errs[:maxErrors]
		errs[maxErrors-1].Msg += fmt.Sprintf(" (and %d more problems after this one)", len(c.errs)-maxErrors)
	}
	if len(errs) == 1 {
		return errs[0]
	}
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}
