package ui

import (
	"errors"

	"github.com/capsem/capsem/store"
)

// pageRows is the most rows one page of a timeline holds: a screenful and
// a few more, so that the first screen of a session costs the same
// whatever its length.
const pageRows = 200

// scanBudget is the most events one request reads looking for a page's
// rows. A filter that matches few events of a long session answers with
// what it found and where it stopped (page.Next), and the page asks again
// from there, instead of one request reading a million events.
const scanBudget = 50_000

// page is one request's part of a timeline.
type page struct {
	Rows []row
	Next uint64 // the last event read: the next page starts after it
	Done bool   // the session's end was reached (a live one may grow)
}

var errPageFull = errors.New("ui: page full")

// readPage reads the rows of session id that f matches, from after f.After.
func readPage(src Source, id string, f filter) (page, error) {
	p := page{Next: f.After}
	scanned := 0
	err := src.EventsAfter(id, f.After, func(ev store.Event) error {
		scanned++
		p.Next = ev.Seq
		for _, r := range rowsOf(&ev) {
			if f.match(&r) {
				p.Rows = append(p.Rows, r)
			}
		}
		if len(p.Rows) >= pageRows || scanned >= scanBudget {
			return errPageFull
		}
		return nil
	})
	if errors.Is(err, errPageFull) {
		return p, nil
	}
	p.Done = err == nil
	return p, err
}
