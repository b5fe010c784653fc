package ui

import (
	"errors"
	"fmt"

	"github.com/capsem/capsem/store"
)

// modelView is a model call's page: the call, its tool calls, and the
// tool results that answered them in later requests of the trace.
type modelView struct {
	Seq   uint64
	Event store.Event
	Call  *store.ModelCall
	Tools []toolView
	// Results this request sent back: answers to earlier calls.
	Results []store.ToolResult
}

type toolView struct {
	store.ToolCall
	Answer   *store.ToolResult // nil until a later request answered it
	AnswerAt uint64            // the event that carried the answer
}

var errFound = errors.New("ui: found")

// eventAt reads event seq of session id.
func eventAt(src Source, id string, seq uint64) (store.Event, error) {
	var out store.Event
	if seq == 0 {
		return out, fmt.Errorf("no event 0: events count from 1")
	}
	err := src.EventsAfter(id, seq-1, func(ev store.Event) error {
		out = ev
		return errFound
	})
	if errors.Is(err, errFound) && out.Seq == seq {
		return out, nil
	}
	if err == nil || errors.Is(err, errFound) {
		return out, fmt.Errorf("session %s has no event %d: %w", id, seq, store.ErrNotFound)
	}
	return out, err
}

// modelCallView reads the model call at seq and looks ahead in the session
// for the tool results that answer its tool calls, until each has one.
func modelCallView(src Source, id string, seq uint64) (*modelView, error) {
	ev, err := eventAt(src, id, seq)
	if err != nil {
		return nil, err
	}
	if ev.ModelCall == nil {
		return nil, fmt.Errorf("event %d of session %s is a %s event, not a model call: %w", seq, id, ev.Kind, store.ErrNotFound)
	}
	v := &modelView{Seq: seq, Event: ev, Call: ev.ModelCall, Results: ev.ModelCall.ToolResults}
	waiting := map[string]int{}
	for i, tc := range ev.ModelCall.ToolCalls {
		v.Tools = append(v.Tools, toolView{ToolCall: tc})
		if tc.CallID != "" {
			waiting[tc.CallID] = i
		}
	}
	if len(waiting) == 0 {
		return v, nil
	}
	err = src.EventsAfter(id, seq, func(later store.Event) error {
		if later.ModelCall == nil {
			return nil
		}
		for _, r := range later.ModelCall.ToolResults {
			if i, ok := waiting[r.CallID]; ok {
				r := r
				v.Tools[i].Answer, v.Tools[i].AnswerAt = &r, later.Seq
				delete(waiting, r.CallID)
			}
		}
		if len(waiting) == 0 {
			return errFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return nil, err
	}
	return v, nil
}
