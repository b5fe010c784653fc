package sqliteexport

import (
	"context"
	"fmt"
	"strings"

	"github.com/capsem/capsem/store"
)

// How the reader turns rows back into events: the inverse of the value
// functions of schema.go, column by column. What the export loses, so what
// an event read back differs in from the one stored:
//
//   - Text that was not valid UTF-8 has each invalid sequence as U+FFFD;
//     scrubbed text (Options.Scrub) is the scrubbed text, and a session id
//     that scrubbing changed is the export's id ("…#N").
//   - Net.Count, DNS.Count and Agent.Count of 0 read as 1 (both mean one).
//   - Net.Direction "" (a record from before capsem kept it) reads as
//     outbound, which is what it was.
//   - ToolCall's link to its MCP call (tool_calls.mcp_call_id) has no field
//     in store.ToolCall and is not read.
//   - Counts.Bytes (the store's encoded size) is not exported: it reads 0.
//     Counts.InputTokens, OutputTokens and CostUSD are the export's sums
//     of model_calls (the same numbers, CostUSD up to float rounding).
//   - A duration is exact up to 2^53 ns (104 days): duration_ms is a REAL.
//   - A time is exact to the nanosecond, read from the text column; the
//     *_ms column is used only where the text does not parse.

// eventTable is how the events of one table are read: its own columns
// after eventHead, and the payload they make.
type eventTable struct {
	name    string
	columns string
	decode  func(c *cols, ev *store.Event)
}

// eventTables are the tables with one row per event (tool_calls and
// tool_responses are read with their model calls).
var eventTables = []*eventTable{
	{name: "net_events", columns: `domain, ip, port, src_ip, src_port, transport, conn_type, decision, direction, reason, matched_rule,
		http_version, method, path, query, status_code, bytes_sent, bytes_received, duration_ms,
		request_headers, response_headers, request_body_preview, response_body_preview, count, detail`,
		decode: func(c *cols, ev *store.Event) {
			ev.Kind = store.KindNet
			ev.Net = &store.Net{
				Domain: c.str(), IP: c.addr(), Port: uint16(c.int()), SrcIP: c.addr(), SrcPort: uint16(c.int()),
				Transport: store.Transport(c.str()), ConnType: store.ConnType(c.str()),
				Decision: store.Decision(c.str()), Direction: store.Direction(c.str()), Reason: c.str(), MatchedRule: c.str(),
				HTTPVersion: c.str(), Method: c.str(), Path: c.str(), Query: c.str(), StatusCode: int(c.int()),
				BytesSent: c.int(), BytesReceived: c.int(), Duration: c.duration(),
				RequestHeaders: c.headers(), ResponseHeaders: c.headers(),
				RequestBodyPreview: c.str(), ResponseBodyPreview: c.str(),
				Count: c.int(), Detail: c.str(),
			}
		}},
	{name: "dns_events", columns: "qname, qtype, transport, decision, reason, matched_rule, answer, resolver_asked, count",
		decode: func(c *cols, ev *store.Event) {
			ev.Kind = store.KindDNS
			ev.DNS = &store.DNS{
				QName: c.str(), QType: c.str(), Transport: store.Transport(c.str()), Decision: store.Decision(c.str()),
				Reason: c.str(), MatchedRule: c.str(), Answer: c.str(), ResolverAsked: c.addr(), Count: c.int(),
			}
		}},
	{name: "model_calls", columns: `provider, domain, model, method, path, stream, system_prompt_preview, messages_count,
		tools_count, request_bytes, request_body_preview, message_id, status_code, text_content, thinking_content,
		stop_reason, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, duration_ms,
		response_bytes, estimated_cost_usd, trace_id, usage_details`,
		decode: func(c *cols, ev *store.Event) {
			ev.Kind = store.KindModelCall
			ev.ModelCall = &store.ModelCall{
				Provider: c.str(), Domain: c.str(), Model: c.str(), Method: c.str(), Path: c.str(), Stream: c.bool(),
				SystemPromptPreview: c.str(), MessagesCount: int(c.int()), ToolsCount: int(c.int()),
				RequestBytes: c.int(), RequestBodyPreview: c.str(), MessageID: c.str(), StatusCode: int(c.int()),
				TextContent: c.str(), ThinkingContent: c.str(), StopReason: c.str(),
				InputTokens: c.int(), OutputTokens: c.int(), CacheReadTokens: c.int(), CacheWriteTokens: c.int(),
				Duration: c.duration(), ResponseBytes: c.int(), CostUSD: c.float(), TraceID: c.str(), UsageDetails: c.str(),
			}
		}},
	{name: "mcp_calls", columns: `server_name, method, tool_name, request_id, request_preview, response_preview, decision,
		duration_ms, error_message, bytes_sent, bytes_received, reason, matched_rule`,
		decode: func(c *cols, ev *store.Event) {
			ev.Kind = store.KindMCPCall
			ev.MCPCall = &store.MCPCall{
				ServerName: c.str(), Method: c.str(), ToolName: c.str(), RequestID: c.str(),
				RequestPreview: c.str(), ResponsePreview: c.str(), Decision: store.Decision(c.str()),
				Duration: c.duration(), ErrorMessage: c.str(), BytesSent: c.int(), BytesReceived: c.int(),
				Reason: c.str(), MatchedRule: c.str(),
			}
		}},
	{name: "fs_events", columns: "action, path, size, old_path, is_dir, guest_time, guest_time_ms",
		decode: func(c *cols, ev *store.Event) {
			ev.Kind = store.KindFS
			ev.FS = &store.FS{Action: c.str(), Path: c.str(), Size: c.int(), OldPath: c.str(), Dir: c.bool(), GuestTime: c.time()}
		}},
	{name: "exec_events", columns: "argv, dir, tty, pid, exit_code, signal, duration_ms, started_at, started_at_ms",
		decode: func(c *cols, ev *store.Event) {
			ev.Kind = store.KindExec
			x := &store.Exec{}
			if err := c.json(&x.Argv); err != nil {
				c.fail("argv: %v", err)
			}
			x.Dir, x.TTY, x.PID, x.ExitCode, x.Signal = c.str(), c.bool(), int(c.int()), int(c.int()), c.str()
			x.Duration, x.Start = c.duration(), c.time()
			ev.Exec = x
		}},
	{name: "agent_events", columns: "state, detail, count",
		decode: func(c *cols, ev *store.Event) {
			ev.Kind = store.KindAgent
			ev.Agent = &store.Agent{State: c.str(), Detail: c.str(), Count: c.int()}
		}},
	{name: "recording_events", columns: "state, detail, count",
		decode: func(c *cols, ev *store.Event) {
			ev.Kind = store.KindRecording
			ev.Recording = &store.Recording{State: c.str(), Detail: c.str(), Count: c.int()}
		}},
	{name: "other_events", columns: "kind",
		decode: func(c *cols, ev *store.Event) {
			// A kind this build could not decode: it has no payload, here
			// as in the store.
			ev.Kind = store.Kind(c.str())
		}},
}

// Chunks of rows read per table: small at first, since a reader often
// wants a page and stops, then larger. A chunk also ends once its rows
// hold chunkBytes (always after one row at least): a row of the exporter
// is a few KiB, so a chunk of maxChunk of them stays far below it, and the
// twelve tables' chunks together hold at most 12 × (chunkBytes + one row
// of maxRowBytes) whatever the file holds.
const (
	firstChunk = 64
	maxChunk   = 1024
	chunkBytes = 16 << 20
)

// cursor reads the rows of one event table of a session in seq order, a
// chunk at a time.
type cursor struct {
	t     *eventTable
	query string
	buf   []store.Event
	pos   int
	after int64 // the seq of the last row read
	last  int64 // the id of the last row read
	chunk int
	done  bool // no rows after buf
}

// merger merges the cursors of every event table by seq.
type merger struct {
	db      Querier
	session string
	cursors []*cursor
	// The ids of the last tool_calls and tool_responses rows attached.
	lastToolCall, lastToolResult int64
}

func newMerger(db Querier, session string, after int64) *merger {
	m := &merger{db: db, session: session}
	for _, t := range eventTables {
		m.cursors = append(m.cursors, &cursor{
			t: t, after: after, chunk: firstChunk,
			query: "SELECT " + eventHead + ", " + t.columns + " FROM " + t.name +
				" WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
		})
	}
	return m
}

// next returns the event of lowest seq not yet returned; false when there
// are none.
func (m *merger) next() (store.Event, bool, error) {
	var best *cursor
	for _, c := range m.cursors {
		if c.pos == len(c.buf) {
			if c.done {
				continue
			}
			if err := m.fill(c); err != nil {
				return store.Event{}, false, err
			}
			if c.pos == len(c.buf) {
				continue
			}
		}
		if best == nil || c.buf[c.pos].Seq < best.buf[best.pos].Seq {
			best = c
		}
	}
	if best == nil {
		return store.Event{}, false, nil
	}
	ev := best.buf[best.pos]
	best.buf[best.pos] = store.Event{} // the caller keeps it; the buffer lets go
	best.pos++
	return ev, true, nil
}

// fill reads the next chunk of c's rows.
func (m *merger) fill(c *cursor) error {
	c.buf, c.pos = c.buf[:0], 0
	ids, full, err := m.readChunk(c)
	if err != nil {
		return fmt.Errorf("%s: %w", c.t.name, err)
	}
	if len(c.buf) < c.chunk && !full {
		c.done = true
	}
	c.chunk = min(c.chunk*2, maxChunk)
	if len(c.buf) == 0 {
		return nil
	}
	c.after = int64(c.buf[len(c.buf)-1].Seq)
	if c.t.name == "model_calls" {
		return m.attachTools(c.buf, ids)
	}
	return nil
}

// readChunk reads up to c.chunk rows of c's table after c.after into c.buf
// and returns their ids; full says it stopped at chunkBytes, with rows
// left to read.
func (m *merger) readChunk(c *cursor) (ids []int64, full bool, err error) {
	rows, err := m.db.QueryContext(context.Background(), c.query, m.session, c.after, c.chunk)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	n := 5 + strings.Count(c.t.columns, ",") + 1
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	size := 0
	for rows.Next() {
		if size >= chunkBytes {
			return ids, true, nil
		}
		clear(vals)
		if err := rows.Scan(ptrs...); err != nil {
			return nil, false, err
		}
		size += valuesSize(vals)
		cs := &cols{vals: vals}
		var ev store.Event
		id := cs.head(&ev)
		c.t.decode(cs, &ev)
		if cs.err != nil {
			return nil, false, fmt.Errorf("row %d (seq %d): %w", id, ev.Seq, cs.err)
		}
		// Seqs are unique per session: each row's is above the last one
		// read, or the next chunk could start where this one did.
		last := c.after
		if n := len(c.buf); n > 0 {
			last = int64(c.buf[n-1].Seq)
		}
		if int64(ev.Seq) <= last {
			return nil, false, fmt.Errorf("row %d: seq %d after seq %d: a session's seqs are unique; the file was not written by capsem export", id, ev.Seq, last)
		}
		// Ids are given in the order of (session, seq): an index that
		// points at one row under many seqs would hand it out as often.
		if id <= c.last {
			return nil, false, fmt.Errorf("row %d after row %d: the export numbers a session's rows in seq order; the file was not written by capsem export", id, c.last)
		}
		c.last = id
		c.buf = append(c.buf, ev)
		ids = append(ids, id)
	}
	return ids, false, rows.Err()
}

// valuesSize is about what a row's values hold in memory.
func valuesSize(vals []any) int {
	n := 0
	for _, v := range vals {
		switch v := v.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		}
		n += 16
	}
	return n
}

// attachTools reads the tool_calls and tool_responses rows of the model
// calls in evs (rows ids) and adds them to their model call, in row order
// (the order of the store's slices). Those rows share their model call's
// seq, so they are read by the (session_id, seq) index over the chunk's
// span, in (seq, id) order, the order of that index, and attached by
// model_call_id.
func (m *merger) attachTools(evs []store.Event, ids []int64) error {
	byID := make(map[int64]*store.ModelCall, len(ids))
	bySeq := make(map[int64]*store.ModelCall, len(ids))
	for i, id := range ids {
		byID[id] = evs[i].ModelCall
		bySeq[int64(evs[i].Seq)] = evs[i].ModelCall
	}
	lo, hi := int64(evs[0].Seq), int64(evs[len(evs)-1].Seq)
	read := func(query string, last *int64, add func(mc *store.ModelCall, c *cols)) error {
		rows, err := m.db.QueryContext(context.Background(), query, m.session, lo, hi)
		if err != nil {
			return err
		}
		defer rows.Close()
		var vals []any
		var ptrs []any
		for rows.Next() {
			if vals == nil {
				names, err := rows.Columns()
				if err != nil {
					return err
				}
				vals, ptrs = make([]any, len(names)), make([]any, len(names))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
			}
			clear(vals)
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			c := &cols{vals: vals}
			id, seq, mcID := c.int(), c.int(), c.next()
			// Ids follow (session, seq) here too: no row is attached twice.
			if id <= *last {
				return fmt.Errorf("row %d after row %d: the export numbers a session's rows in seq order; the file was not written by capsem export", id, *last)
			}
			*last = id
			mc := byID[toInt(mcID)]
			if mcID == nil {
				mc = bySeq[seq] // not written so, but its seq says whose it is
			}
			if mc == nil {
				return fmt.Errorf("row %d: model_call_id %v is not a model call of this session in seq %d to %d", id, mcID, lo, hi)
			}
			add(mc, c)
			if c.err != nil {
				return fmt.Errorf("row %d: %w", id, c.err)
			}
		}
		return rows.Err()
	}
	err := read(`SELECT id, seq, model_call_id, call_index, call_id, tool_name, arguments, origin FROM tool_calls
		WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq, id`, &m.lastToolCall,
		func(mc *store.ModelCall, c *cols) {
			mc.ToolCalls = append(mc.ToolCalls, store.ToolCall{
				Index: int(c.int()), CallID: c.str(), Name: c.str(), Arguments: c.str(), Origin: c.str()})
		})
	if err != nil {
		return fmt.Errorf("tool_calls: %w", err)
	}
	err = read(`SELECT id, seq, model_call_id, call_id, content_preview, is_error FROM tool_responses
		WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq, id`, &m.lastToolResult,
		func(mc *store.ModelCall, c *cols) {
			mc.ToolResults = append(mc.ToolResults, store.ToolResult{CallID: c.str(), ContentPreview: c.str(), IsError: c.bool()})
		})
	if err != nil {
		return fmt.Errorf("tool_responses: %w", err)
	}
	return nil
}
