package ocsf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/version"
)

// Version is the OCSF schema version the events follow.
const Version = "1.8.0"

// Source is where the events come from: a store, or an export's reader.
type Source interface {
	Events(id string, fn func(store.Event) error) error
}

// Options say how to write.
type Options struct {
	// Scrub redacts secrets in every text, as capsem export --scrub does:
	// API keys, tokens, credential-looking words and the sessions'
	// placeholders.
	Scrub bool
}

// Result counts what was written.
type Result struct {
	Events  int                // OCSF events written
	ByClass map[string]int     // by OCSF class name
	Skipped map[store.Kind]int // events of a kind with no class here (agent, recording, kinds from a newer capsem)
}

// Write writes the events of sessions from src to w, one OCSF event a
// line, in each session's order.
func Write(w io.Writer, src Source, sessions []store.Session, opt Options) (Result, error) {
	res := Result{ByClass: map[string]int{}, Skipped: map[store.Kind]int{}}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	m := &mapper{scrub: opt.Scrub}
	if opt.Scrub {
		var vals []string
		for _, s := range sessions {
			for _, p := range s.Placeholders {
				vals = append(vals, p.Value)
			}
		}
		m.ph = dlp.NewScrubber(vals)
	}
	for i := range sessions {
		sess := &sessions[i]
		err := src.Events(sess.ID, func(ev store.Event) error {
			out, class := m.event(sess, &ev)
			if out == nil {
				res.Skipped[ev.Kind]++
				return nil
			}
			if err := enc.Encode(out); err != nil {
				return err
			}
			res.Events++
			res.ByClass[class]++
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("ocsf: session %s: %w", sess.ID, err)
		}
	}
	return res, bw.Flush()
}

// product is metadata.product of every event.
func product() obj {
	return obj{"name": "capsem", "vendor_name": "capsem", "version": version.Number}
}
