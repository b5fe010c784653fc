package sqliteexport

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"

	"github.com/capsem/capsem/store"
)

// pending is one statement execution waiting in a batch: the statement
// (a table's insert, by the table's place in schema, setEvents or
// linkMCP) and its arguments.
type pending struct {
	stmt int
	args []any
}

// setEventsSQL sets a session's events column once its events are read.
const setEventsSQL = "UPDATE sessions SET events = ? WHERE id = ?"

// linkMCPSQL sets a tool call's mcp_call_id once its MCP call is read
// (mcplink.go).
const linkMCPSQL = "UPDATE tool_calls SET mcp_call_id = ? WHERE id = ?"

const batchRows = 2048

// copyEvents reads the events of every session in one goroutine, turning
// them into rows, while this one inserts them: reading and decoding the
// store and writing SQLite each take about one core.
func copyEvents(ctx context.Context, st *store.Store, tx *sql.Tx, sessions []store.Session, ids []string, conv *converter, res *Result) error {
	setEvents := len(schema) // the statements after the tables' inserts
	linkMCP := setEvents + 1
	stmts := make([]*sql.Stmt, linkMCP+1)
	for i := range stmts {
		query := setEventsSQL
		if i == linkMCP {
			query = linkMCPSQL
		}
		if i < setEvents {
			if schema[i] == sessionsTable {
				continue // its rows are in before the events
			}
			query = schema[i].insertSQL()
		}
		s, err := tx.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("sqliteexport: prepare: %w", err)
		}
		defer s.Close()
		stmts[i] = s
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []pending, 4)
	free := make(chan []pending, 6)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		readErr <- readEvents(ctx, st, sessions, ids, conv, setEvents, linkMCP, batches, free, res)
	}()

	// The statements run under a context without cancellation: with a
	// cancellable one the driver starts a goroutine per execution to
	// watch it, which costs more than the insert. Cancellation is checked
	// once per batch instead.
	exec := context.WithoutCancel(ctx)
	var werr error
	for b := range batches {
		if werr == nil && ctx.Err() != nil {
			werr = ctx.Err()
		}
		if werr == nil {
			for i := range b {
				if _, err := stmts[b[i].stmt].ExecContext(exec, b[i].args...); err != nil {
					werr = fmt.Errorf("sqliteexport: insert: %w", err)
					cancel() // stop the reader; keep draining so that it can exit
					break
				}
			}
		}
		select {
		case free <- b[:0]:
		default:
		}
	}
	rerr := <-readErr
	if werr != nil {
		return werr
	}
	return rerr
}

// readEvents turns the events of sessions into rows, in batches sent to
// out (and reused from free), ids counting up per table in export order;
// after each session's events, the statement setEvents with their number;
// the statement linkMCP links a tool call to its MCP call once that is read.
func readEvents(ctx context.Context, st *store.Store, sessions []store.Session, ids []string, conv *converter,
	setEvents, linkMCP int, out chan<- []pending, free <-chan []pending, res *Result) error {
	next := make([]int64, len(schema)) // last id given, per table
	batch := make([]pending, 0, batchRows)
	send := func() error {
		select {
		case out <- batch:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case batch = <-free:
		default:
			batch = make([]pending, 0, batchRows)
		}
		return nil
	}
	add := func(p pending) error {
		batch = append(batch, p)
		if len(batch) == batchRows {
			return send()
		}
		return nil
	}
	// row adds the row of t made from s, with the next id of t.
	row := func(t *table, s *source) error {
		next[t.pos]++
		s.id = next[t.pos]
		return add(pending{t.pos, t.args(conv, s)})
	}
	links := &mcpLinker{link: func(toolCall, mcpCall int64) error {
		res.MCPLinks++
		return add(pending{linkMCP, []any{mcpCall, toolCall}})
	}}
	for i := range sessions {
		sid := ids[i]
		n := 0
		links.reset() // an MCP call of one session never carried another's tool call
		err := st.Values(sessions[i].ID, 0, func(seq uint64, v []byte) error {
			if n%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			n++
			ev := store.Event{Session: sessions[i].ID, Seq: seq}
			if err := store.DecodeEvent(v, &ev); err != nil {
				return fmt.Errorf("store: session %q event %d: %w", ev.Session, seq, err)
			}
			s := &source{session: sid, ev: &ev, sum: store.ValueHash(v)}
			if prev, ok := store.PrevOf(v); ok {
				s.prev = &prev
			}
			if !conv.scrub {
				s.raw = bytes.Clone(v) // the rows are inserted after v is reused
			} else {
				s.raw = v[:0:0] // there, but not exported
			}
			return eventRows(s, row, links, res)
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("sqliteexport: read session %q: %w", sessions[i].ID, err)
		}
		res.Events += n
		if err := add(pending{setEvents, []any{int64(n), sid}}); err != nil {
			return err
		}
	}
	if len(batch) > 0 {
		return send()
	}
	return ctx.Err()
}

// eventRows makes the rows of the event of s, calling row for each: one
// row of its kind's table, or for a model call its model_calls row, then
// one row per tool call and per tool result, each pointing at it (s.id is
// the model call's row id once row returns) and sharing its seq. It counts
// them in res. With links (nil: no linking), an MCP tool call waits there
// for the MCP call that carried it, and an MCP call is linked to it.
func eventRows(s *source, row func(t *table, s *source) error, links *mcpLinker, res *Result) error {
	ev := s.ev
	switch {
	case ev.Net != nil:
		res.NetEvents++
		return row(netEvents, s)
	case ev.DNS != nil:
		res.DNSEvents++
		return row(dnsEvents, s)
	case ev.ModelCall != nil:
		// One model_calls row, then its tool calls and tool
		// results, each pointing at it and sharing its seq.
		if err := row(modelCalls, s); err != nil {
			return err
		}
		res.ModelCalls++
		s.modelCall = s.id
		if links != nil {
			links.answered(ev.ModelCall.ToolResults)
		}
		for j := range ev.ModelCall.ToolCalls {
			s.toolCall = &ev.ModelCall.ToolCalls[j]
			if err := row(toolCalls, s); err != nil {
				return err
			}
			res.ToolCalls++
			if links != nil {
				if err := links.toolCall(s.id, ev.Time, ev.ModelCall.Duration, s.toolCall); err != nil {
					return err
				}
			}
		}
		for j := range ev.ModelCall.ToolResults {
			s.toolResult = &ev.ModelCall.ToolResults[j]
			if err := row(toolResponses, s); err != nil {
				return err
			}
			res.ToolResponses++
		}
		return nil
	case ev.Exec != nil:
		res.ExecEvents++
		return row(execEvents, s)
	case ev.FS != nil:
		res.FSEvents++
		return row(fsEvents, s)
	case ev.Agent != nil:
		res.AgentEvents++
		return row(agentEvents, s)
	case ev.Recording != nil:
		res.RecordingEvents++
		return row(recordingEvents, s)
	case ev.MCPCall != nil:
		res.MCPCalls++
		if err := row(mcpCalls, s); err != nil {
			return err
		}
		if links != nil {
			return links.mcpCall(s.id, ev.Time, ev.MCPCall)
		}
		return nil
	default:
		res.OtherEvents++
		return row(otherEvents, s)
	}
}
