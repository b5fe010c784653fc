package sqliteexport

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capsem/capsem/store"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// Options select what Export writes and how.
type Options struct {
	// Sessions are the ids of the sessions to export; empty means every
	// session in the store. An id that is not in the store is an error.
	Sessions []string
	// Scrub passes every text value through [Scrub].
	Scrub bool
	// Overwrite allows replacing an existing file at the destination
	// (atomically: readers see the old file or the new one, never a mix).
	Overwrite bool
}

// Result says what Export wrote.
type Result struct {
	Sessions        int // rows in sessions
	Events          int // stored events exported, all kinds
	NetEvents       int // rows in net_events
	DNSEvents       int // rows in dns_events
	ModelCalls      int // rows in model_calls: one per model_call event
	ToolCalls       int // rows in tool_calls: the model calls' tool calls
	ToolResponses   int // rows in tool_responses: the tool results the model calls' requests carried
	ExecEvents      int // rows in exec_events: commands the guest ran
	FSEvents        int // rows in fs_events: changes in the workspace
	AgentEvents     int // rows in agent_events: the guest agent went silent, was cut off, …
	RecordingEvents int // rows in recording_events: the store's budget, disk and gaps
	OtherEvents     int // rows in other_events: kinds this build cannot decode
	Duration        time.Duration
}

// Export writes the sessions of st selected by opt, with all their events,
// to a new SQLite database at outPath. The file is built under a temporary
// name in the same directory and renamed to outPath only when complete;
// on error nothing is left behind and an existing outPath is untouched.
// Export only reads st, which may be open read-only or still being written
// (a session being written is exported as far as its synced events go).
func Export(ctx context.Context, st *store.Store, outPath string, opt Options) (res Result, err error) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	if st == nil {
		return res, errors.New("sqliteexport: no store given")
	}
	if outPath == "" {
		return res, errors.New("sqliteexport: no output path given")
	}
	if !opt.Overwrite {
		if err := refuseExisting(outPath); err != nil {
			return res, err
		}
	}
	sessions, err := selectSessions(st, opt.Sessions)
	if err != nil {
		return res, err
	}

	dir, base := filepath.Split(outPath)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return res, fmt.Errorf("sqliteexport: create a temporary file next to %s: %w", outPath, err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()

	if err := build(ctx, st, tmp, sessions, opt, &res); err != nil {
		return res, err
	}
	if err := syncFile(tmp); err != nil {
		return res, fmt.Errorf("sqliteexport: sync %s: %w", tmp, err)
	}
	if err := place(tmp, outPath, opt.Overwrite); err != nil {
		return res, err
	}
	_ = syncFile(dir) // make the rename durable; not every filesystem can sync a directory
	return res, nil
}

func refuseExisting(outPath string) error {
	_, err := os.Lstat(outPath)
	if err == nil {
		return fmt.Errorf("sqliteexport: %s already exists; remove it, choose another path, or ask to overwrite it: %w", outPath, fs.ErrExist)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqliteexport: check %s: %w", outPath, err)
	}
	return nil
}

// place moves the finished file tmp to outPath. Without overwrite it links
// (which fails if outPath appeared meanwhile) rather than renames.
func place(tmp, outPath string, overwrite bool) error {
	if overwrite {
		if err := os.Rename(tmp, outPath); err != nil {
			return fmt.Errorf("sqliteexport: move the export into place at %s: %w", outPath, err)
		}
		return nil
	}
	if err := os.Link(tmp, outPath); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return refuseExisting(outPath)
		}
		// A filesystem without hard links: check, then rename.
		if err := refuseExisting(outPath); err != nil {
			return err
		}
		if err := os.Rename(tmp, outPath); err != nil {
			return fmt.Errorf("sqliteexport: move the export into place at %s: %w", outPath, err)
		}
		return nil
	}
	return os.Remove(tmp)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// selectSessions returns the sessions to export, oldest first (ties by id).
func selectSessions(st *store.Store, ids []string) ([]store.Session, error) {
	var out []store.Session
	if len(ids) == 0 {
		all, err := st.Sessions()
		if err != nil {
			return nil, fmt.Errorf("sqliteexport: list sessions: %w", err)
		}
		out = all
	} else {
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			s, err := st.Session(id)
			if errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("sqliteexport: session %q is not in the store (list them with `capsem sessions`): %w", id, err)
			}
			if err != nil {
				return nil, fmt.Errorf("sqliteexport: %w", err)
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b store.Session) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// fileURI returns path as a file: URI, so that characters the driver or
// SQLite would read as URI syntax ('?', '#', '%') are taken literally.
func fileURI(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	path = filepath.ToSlash(path)
	if !strings.HasPrefix(path, "/") {
		path = "/" + path // a Windows drive letter
	}
	return (&url.URL{Scheme: "file", Path: path}).String()
}

// build writes the whole database into the fresh file path.
func build(ctx context.Context, st *store.Store, path string, sessions []store.Session, opt Options, res *Result) error {
	db, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		return fmt.Errorf("sqliteexport: open %s: %w", path, err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqliteexport: open %s: %w", path, err)
	}
	defer conn.Close()

	// The file is new and is renamed into place only when complete, so
	// neither a rollback journal nor syncs are needed while building it.
	for _, p := range []string{
		"PRAGMA page_size = 8192",
		"PRAGMA journal_mode = OFF",
		"PRAGMA synchronous = OFF",
		"PRAGMA locking_mode = EXCLUSIVE",
		"PRAGMA temp_store = MEMORY",
		"PRAGMA cache_size = -131072", // 128 MiB: index builds sort in memory
		fmt.Sprintf("PRAGMA application_id = %d", ApplicationID),
		fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion),
	} {
		if _, err := conn.ExecContext(ctx, p); err != nil {
			return fmt.Errorf("sqliteexport: %s: %w", p, err)
		}
	}

	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqliteexport: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	for _, ddl := range tables {
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("sqliteexport: create table: %w", err)
		}
	}

	conv := converter{scrub: opt.Scrub}
	ids := make([]string, len(sessions))
	insSession, err := tx.PrepareContext(ctx, insertSQL("sessions", sessionColumns))
	if err != nil {
		return fmt.Errorf("sqliteexport: prepare: %w", err)
	}
	defer insSession.Close()
	for i := range sessions {
		ids[i] = conv.sessionID(sessions[i].ID, i+1)
		if _, err := insSession.ExecContext(ctx, conv.session(&sessions[i], ids[i])...); err != nil {
			return fmt.Errorf("sqliteexport: session %q: %w", sessions[i].ID, err)
		}
	}
	res.Sessions = len(sessions)

	if err := copyEvents(ctx, st, tx, sessions, ids, &conv, res); err != nil {
		return err
	}

	for _, q := range sessionCounts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sqliteexport: session counts: %w", err)
		}
	}
	for _, q := range indexes() {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sqliteexport: %s: %w", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqliteexport: commit: %w", err)
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("sqliteexport: close %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("sqliteexport: close %s: %w", path, err)
	}
	return nil
}

// Tables rows are copied into, as indexes into insertion statements.
const (
	tNet = iota
	tDNS
	tModelCall
	tToolCall
	tToolResponse
	tExec
	tFS
	tAgent
	tRecording
	tOther
	tSessionEvents // UPDATE sessions SET events
	nTables
)

var sessionColumns = []string{
	"id", "started_at", "started_at_ms", "ended_at", "ended_at_ms", "command", "exit_code",
	"policy_sha256", "image", "host", "lost",
}

var netColumns = []string{
	"id", "session_id", "seq", "timestamp", "timestamp_ms",
	"domain", "ip", "port", "src_ip", "src_port", "transport", "conn_type",
	"decision", "reason", "matched_rule", "method", "path", "query", "status_code",
	"bytes_sent", "bytes_received", "duration_ms", "request_headers", "response_headers",
	"request_body_preview", "response_body_preview", "count", "detail",
}

var dnsColumns = []string{
	"id", "session_id", "seq", "timestamp", "timestamp_ms",
	"qname", "qtype", "transport", "decision", "reason", "matched_rule", "answer", "resolver_asked", "count",
}

var modelCallColumns = []string{
	"id", "session_id", "seq", "timestamp", "timestamp_ms",
	"provider", "domain", "model", "method", "path", "stream", "system_prompt_preview",
	"messages_count", "tools_count", "request_bytes", "request_body_preview", "message_id",
	"status_code", "text_content", "thinking_content", "stop_reason",
	"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
	"duration_ms", "response_bytes", "estimated_cost_usd", "trace_id", "usage_details",
}

var toolCallColumns = []string{
	"id", "session_id", "seq", "timestamp", "timestamp_ms",
	"model_call_id", "call_index", "call_id", "tool_name", "arguments", "origin", "mcp_call_id",
}

var toolResponseColumns = []string{
	"id", "session_id", "seq", "timestamp", "timestamp_ms",
	"model_call_id", "call_id", "content_preview", "is_error",
}

var execColumns = []string{
	"id", "session_id", "seq", "timestamp", "timestamp_ms",
	"command", "exit_code", "duration_ms", "argv", "dir", "tty", "pid", "signal", "started_at", "started_at_ms",
}

var fsColumns = []string{
	"id", "session_id", "seq", "timestamp", "timestamp_ms",
	"action", "path", "size", "old_path", "is_dir", "guest_time", "guest_time_ms",
}

var recordingColumns = []string{
	"id", "session_id", "seq", "timestamp", "timestamp_ms",
	"state", "detail", "count",
}

var agentColumns = []string{
	"id", "session_id", "seq", "timestamp", "timestamp_ms",
	"state", "detail", "count",
}

var otherColumns = []string{"id", "session_id", "seq", "timestamp", "timestamp_ms", "kind"}

func insertSQL(table string, cols []string) string {
	return "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
}

// row is one statement execution: a table (tNet, …) and its arguments.
type row struct {
	table int
	args  []any
}

const batchRows = 2048

// copyEvents reads the events of every session in one goroutine, turning
// them into rows, while this one inserts them: reading and decoding the
// store and writing SQLite each take about one core.
func copyEvents(ctx context.Context, st *store.Store, tx *sql.Tx, sessions []store.Session, ids []string, conv *converter, res *Result) error {
	stmts := make([]*sql.Stmt, nTables)
	for t, q := range map[int]string{
		tNet:           insertSQL("net_events", netColumns),
		tDNS:           insertSQL("dns_events", dnsColumns),
		tModelCall:     insertSQL("model_calls", modelCallColumns),
		tToolCall:      insertSQL("tool_calls", toolCallColumns),
		tToolResponse:  insertSQL("tool_responses", toolResponseColumns),
		tExec:          insertSQL("exec_events", execColumns),
		tFS:            insertSQL("fs_events", fsColumns),
		tAgent:         insertSQL("agent_events", agentColumns),
		tRecording:     insertSQL("recording_events", recordingColumns),
		tOther:         insertSQL("other_events", otherColumns),
		tSessionEvents: "UPDATE sessions SET events = ? WHERE id = ?",
	} {
		s, err := tx.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("sqliteexport: prepare: %w", err)
		}
		defer s.Close()
		stmts[t] = s
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []row, 4)
	free := make(chan []row, 6)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		readErr <- readEvents(ctx, st, sessions, ids, conv, batches, free, res)
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
				if _, err := stmts[b[i].table].ExecContext(exec, b[i].args...); err != nil {
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

func readEvents(ctx context.Context, st *store.Store, sessions []store.Session, ids []string, conv *converter,
	out chan<- []row, free <-chan []row, res *Result) error {
	var next [nTables]int64 // last id given, per table
	batch := make([]row, 0, batchRows)
	send := func() error {
		select {
		case out <- batch:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case batch = <-free:
		default:
			batch = make([]row, 0, batchRows)
		}
		return nil
	}
	add := func(r row) error {
		batch = append(batch, r)
		if len(batch) == batchRows {
			return send()
		}
		return nil
	}
	for i := range sessions {
		sid := ids[i]
		n := 0
		err := st.Events(sessions[i].ID, func(ev store.Event) error {
			if n%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			n++
			var r row
			switch {
			case ev.Net != nil:
				next[tNet]++
				r = row{tNet, conv.net(next[tNet], sid, &ev)}
				res.NetEvents++
			case ev.DNS != nil:
				next[tDNS]++
				r = row{tDNS, conv.dns(next[tDNS], sid, &ev)}
				res.DNSEvents++
			case ev.ModelCall != nil:
				// One model_calls row, then its tool calls and tool
				// results, each pointing at it and sharing its seq.
				next[tModelCall]++
				mc := next[tModelCall]
				if err := add(row{tModelCall, conv.modelCall(mc, sid, &ev)}); err != nil {
					return err
				}
				res.ModelCalls++
				for j := range ev.ModelCall.ToolCalls {
					next[tToolCall]++
					if err := add(row{tToolCall, conv.toolCall(next[tToolCall], sid, &ev, mc, &ev.ModelCall.ToolCalls[j])}); err != nil {
						return err
					}
					res.ToolCalls++
				}
				for j := range ev.ModelCall.ToolResults {
					next[tToolResponse]++
					if err := add(row{tToolResponse, conv.toolResponse(next[tToolResponse], sid, &ev, mc, &ev.ModelCall.ToolResults[j])}); err != nil {
						return err
					}
					res.ToolResponses++
				}
				return nil
			case ev.Exec != nil:
				next[tExec]++
				r = row{tExec, conv.exec(next[tExec], sid, &ev)}
				res.ExecEvents++
			case ev.FS != nil:
				next[tFS]++
				r = row{tFS, conv.fs(next[tFS], sid, &ev)}
				res.FSEvents++
			case ev.Agent != nil:
				next[tAgent]++
				r = row{tAgent, conv.agent(next[tAgent], sid, &ev)}
				res.AgentEvents++
			case ev.Recording != nil:
				next[tRecording]++
				r = row{tRecording, conv.recording(next[tRecording], sid, &ev)}
				res.RecordingEvents++
			default:
				next[tOther]++
				r = row{tOther, conv.other(next[tOther], sid, &ev)}
				res.OtherEvents++
			}
			return add(r)
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("sqliteexport: read session %q: %w", sessions[i].ID, err)
		}
		res.Events += n
		if err := add(row{tSessionEvents, []any{int64(n), sid}}); err != nil {
			return err
		}
	}
	if len(batch) > 0 {
		return send()
	}
	return ctx.Err()
}

// converter turns store records into statement arguments.
type converter struct {
	scrub bool
	buf   bytes.Buffer
}

// text returns s as a TEXT argument: NULL when empty, invalid UTF-8
// replaced, scrubbed when asked.
func (c *converter) text(s string) any {
	if s == "" {
		return nil
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if c.scrub {
		s = Scrub(s)
	}
	return s
}

// sessionID returns the id a session has in the export: its store id,
// or, when scrubbing changes it, the scrubbed id made unique by the
// session's ordinal.
func (c *converter) sessionID(id string, ordinal int) string {
	if !c.scrub {
		return id
	}
	if s := Scrub(id); s != id {
		return fmt.Sprintf("%s#%d", s, ordinal)
	}
	return id
}

const tsLayout = "2006-01-02T15:04:05.000000000Z"

func timestamp(t time.Time) (any, any) {
	if t.IsZero() {
		return nil, nil
	}
	return t.UTC().Format(tsLayout), t.UnixMilli()
}

// eventTime is timestamp for a column that is never NULL.
func eventTime(t time.Time) (any, any) {
	return t.UTC().Format(tsLayout), t.UnixMilli()
}

func addr(a interface {
	IsValid() bool
	String() string
}) any {
	if !a.IsValid() {
		return nil
	}
	return a.String()
}

func nonZero[T int | int64 | uint16](v T) any {
	if v == 0 {
		return nil
	}
	return int64(v)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// bit is a bool as the 0 or 1 of an INTEGER column.
func bit(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// finite is v, or 0 for NaN and ±Inf (which SQLite would store as NULL or
// carry into every sum). The store never hands them out; this is the
// exporter not relying on it.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// argv returns the words of a command line as valid UTF-8 and, when
// scrubbing, with [scrubArgv] applied.
func (c *converter) argv(args []string) []string {
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = strings.ToValidUTF8(a, "\uFFFD")
	}
	if c.scrub {
		words = scrubArgv(words)
	}
	return words
}

// json encodes v compactly, without HTML escaping.
func (c *converter) json(v any) any {
	c.buf.Reset()
	enc := json.NewEncoder(&c.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only strings and slices of them are encoded: cannot happen.
		panic(fmt.Sprintf("sqliteexport: encoding JSON: %v", err))
	}
	return strings.TrimSuffix(c.buf.String(), "\n")
}

func (c *converter) headers(hs []store.Header) any {
	if len(hs) == 0 {
		return nil
	}
	out := make([][2]string, len(hs))
	for i, h := range hs {
		name, value := strings.ToValidUTF8(h.Name, "\uFFFD"), strings.ToValidUTF8(h.Value, "\uFFFD")
		if c.scrub {
			name, value = scrubHeader(name, value)
		}
		out[i] = [2]string{name, value}
	}
	return c.json(out)
}

func (c *converter) session(s *store.Session, id string) []any {
	started, startedMS := timestamp(s.StartedAt)
	ended, endedMS := timestamp(s.EndedAt)
	var command any
	if len(s.Command) > 0 {
		command = c.json(c.argv(s.Command))
	}
	var exit any
	if s.ExitCode != nil {
		exit = int64(*s.ExitCode)
	}
	return []any{id, started, startedMS, ended, endedMS, command, exit,
		c.text(s.PolicySHA256), c.text(s.Image), c.text(s.Host), s.Counts.Lost}
}

func (c *converter) net(id int64, session string, ev *store.Event) []any {
	n := ev.Net
	ts, tsMS := eventTime(ev.Time)
	count := max(n.Count, 1)
	return []any{id, session, int64(ev.Seq), ts, tsMS,
		c.text(n.Domain), addr(n.IP), nonZero(n.Port), addr(n.SrcIP), nonZero(n.SrcPort),
		c.text(string(n.Transport)), c.text(string(n.ConnType)),
		c.text(string(n.Decision)), c.text(n.Reason), c.text(n.MatchedRule),
		c.text(n.Method), c.text(n.Path), c.text(n.Query), nonZero(n.StatusCode),
		n.BytesSent, n.BytesReceived, ms(n.Duration),
		c.headers(n.RequestHeaders), c.headers(n.ResponseHeaders),
		c.text(n.RequestBodyPreview), c.text(n.ResponseBodyPreview),
		count, c.text(n.Detail),
	}
}

func (c *converter) dns(id int64, session string, ev *store.Event) []any {
	d := ev.DNS
	ts, tsMS := eventTime(ev.Time)
	return []any{id, session, int64(ev.Seq), ts, tsMS,
		c.text(d.QName), c.text(d.QType), c.text(string(d.Transport)),
		c.text(string(d.Decision)), c.text(d.Reason), c.text(d.MatchedRule),
		c.text(d.Answer), addr(d.ResolverAsked), max(d.Count, 1),
	}
}

func (c *converter) modelCall(id int64, session string, ev *store.Event) []any {
	m := ev.ModelCall
	ts, tsMS := eventTime(ev.Time)
	return []any{id, session, int64(ev.Seq), ts, tsMS,
		c.text(m.Provider), c.text(m.Domain), c.text(m.Model), c.text(m.Method), c.text(m.Path),
		bit(m.Stream), c.text(m.SystemPromptPreview),
		int64(m.MessagesCount), int64(m.ToolsCount), m.RequestBytes, c.text(m.RequestBodyPreview),
		c.text(m.MessageID), nonZero(m.StatusCode),
		c.text(m.TextContent), c.text(m.ThinkingContent), c.text(m.StopReason),
		m.InputTokens, m.OutputTokens, m.CacheReadTokens, m.CacheWriteTokens,
		ms(m.Duration), m.ResponseBytes, finite(m.CostUSD), c.text(m.TraceID), c.text(m.UsageDetails),
	}
}

// toolCall is the row of a tool call the model made in the response of the
// model call whose row id is modelCall. mcp_call_id stays NULL until the
// store records MCP calls.
func (c *converter) toolCall(id int64, session string, ev *store.Event, modelCall int64, tc *store.ToolCall) []any {
	ts, tsMS := eventTime(ev.Time)
	return []any{id, session, int64(ev.Seq), ts, tsMS,
		modelCall, int64(tc.Index), c.text(tc.CallID), c.text(tc.Name), c.text(tc.Arguments), c.text(tc.Origin), nil,
	}
}

// toolResponse is the row of a tool result sent back in the request of the
// model call whose row id is modelCall; call_id names the tool_calls row
// it answers (made by an earlier model call).
func (c *converter) toolResponse(id int64, session string, ev *store.Event, modelCall int64, tr *store.ToolResult) []any {
	ts, tsMS := eventTime(ev.Time)
	return []any{id, session, int64(ev.Seq), ts, tsMS,
		modelCall, c.text(tr.CallID), c.text(tr.ContentPreview), bit(tr.IsError),
	}
}

// exec is the row of a command the guest ran. command and argv are NULL
// for an empty argv (the guest's interactive shell); command is built
// from the words argv holds, so it is scrubbed as they are.
func (c *converter) exec(id int64, session string, ev *store.Event) []any {
	x := ev.Exec
	ts, tsMS := eventTime(ev.Time)
	started, startedMS := timestamp(x.Start)
	var command, argv any
	if len(x.Argv) > 0 {
		words := c.argv(x.Argv)
		command = shellJoin(words)
		argv = c.json(words)
	}
	return []any{id, session, int64(ev.Seq), ts, tsMS,
		command, int64(x.ExitCode), ms(x.Duration),
		argv, c.text(x.Dir), bit(x.TTY), nonZero(x.PID), c.text(x.Signal), started, startedMS,
	}
}

func (c *converter) fs(id int64, session string, ev *store.Event) []any {
	f := ev.FS
	ts, tsMS := eventTime(ev.Time)
	guest, guestMS := timestamp(f.GuestTime)
	return []any{id, session, int64(ev.Seq), ts, tsMS,
		c.text(f.Action), c.text(f.Path), f.Size, c.text(f.OldPath), bit(f.Dir), guest, guestMS,
	}
}

func (c *converter) recording(id int64, session string, ev *store.Event) []any {
	r := ev.Recording
	ts, tsMS := eventTime(ev.Time)
	return []any{id, session, int64(ev.Seq), ts, tsMS,
		c.text(r.State), c.text(r.Detail), r.Count,
	}
}

func (c *converter) agent(id int64, session string, ev *store.Event) []any {
	a := ev.Agent
	ts, tsMS := eventTime(ev.Time)
	return []any{id, session, int64(ev.Seq), ts, tsMS,
		c.text(a.State), c.text(a.Detail), max(a.Count, 1),
	}
}

func (c *converter) other(id int64, session string, ev *store.Event) []any {
	ts, tsMS := eventTime(ev.Time)
	kind := c.text(string(ev.Kind))
	if kind == nil {
		kind = "unknown"
	}
	return []any{id, session, int64(ev.Seq), ts, tsMS, kind}
}
