package inspect

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/capsem/capsem/mitm/provider"
	"github.com/capsem/capsem/store/sqliteexport"
)

// Tables are the tables a capsem export must have, in report order.
var Tables = []string{"sessions", "net_events", "dns_events", "model_calls", "tool_calls",
	"tool_responses", "mcp_calls", "fs_events", "exec_events", "agent_events", "recording_events", "other_events"}

// Check is one integrity check: its name, whether it holds, and what
// failed (a count and the first few rows).
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Report is what Build finds in an export: its rows per table, the first
// rows of a few, the denied flows, the top domains and the checks.
type Report struct {
	Rows      map[string]int64    `json:"rows"`
	Preview   map[string][]string `json:"preview"`
	Denied    []string            `json:"denied"`
	TopDomain []string            `json:"top_domains"`
	Checks    []Check             `json:"checks"`
}

// lines runs q and formats each row as its columns joined by "  ", the
// values as they are: printReport escapes them for the terminal. Every
// query given to it has a LIMIT or reads a bounded table.
func lines(db sqliteexport.Querier, q string, args ...any) ([]string, error) {
	_, out, err := firstLines(db, -1, q, args...)
	return out, err
}

// firstLines is lines of the first max rows of q (all of them for a
// negative max), with the number of rows q gives: a check's failures are
// counted whatever their number and only the first few are kept.
func firstLines(db sqliteexport.Querier, max int, q string, args ...any) (int64, []string, error) {
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", strings.Fields(q)[0], err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	var n int64
	for rows.Next() {
		if n++; max >= 0 && len(out) >= max {
			continue
		}
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return 0, nil, err
		}
		parts := make([]string, len(cols))
		for i, v := range vals {
			parts[i] = cols[i] + "=" + v.String
			if !v.Valid {
				parts[i] = cols[i] + "=-"
			}
		}
		out = append(out, strings.Join(parts, "  "))
	}
	return n, out, rows.Err()
}

// shownFailures is how many of a check's failing rows its detail names.
const shownFailures = 3

// Build reads the export db: n rows per list, every check. A check that
// fails is in Report.Checks, not an error; an error is a query that
// failed.
func Build(db sqliteexport.Querier, n int) (Report, error) {
	r := Report{Rows: map[string]int64{}, Preview: map[string][]string{}}
	present := map[string]bool{}
	names, err := lines(db, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		return r, err
	}
	for _, l := range names {
		present[strings.TrimPrefix(l, "name=")] = true
	}
	var missing []string
	for _, t := range Tables {
		if !present[t] {
			missing = append(missing, t)
			continue
		}
		var count int64
		if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM `+t).Scan(&count); err != nil {
			return r, err
		}
		r.Rows[t] = count
	}
	r.Checks = append(r.Checks, Check{Name: "all tables exist", OK: len(missing) == 0, Detail: strings.Join(missing, ", ")})
	if len(missing) > 0 {
		return r, nil
	}
	var schemaErrs []string
	for _, err := range sqliteexport.VerifySchema(db, sqliteexport.SchemaVersion) {
		schemaErrs = append(schemaErrs, err.Error())
	}
	r.Checks = append(r.Checks, Check{Name: "columns, keys and indexes match the schema", OK: len(schemaErrs) == 0, Detail: strings.Join(schemaErrs, "; ")})
	previews := map[string]string{
		"dns_events":  `SELECT timestamp, qname, qtype, decision, answer, resolver_asked, count FROM dns_events ORDER BY id LIMIT ?`,
		"net_events":  `SELECT timestamp, transport, decision, reason, domain, ip, port, bytes_sent, bytes_received, count FROM net_events ORDER BY id LIMIT ?`,
		"model_calls": `SELECT timestamp, provider, model, status_code, input_tokens, output_tokens FROM model_calls ORDER BY id LIMIT ?`,
		"tool_calls":  `SELECT timestamp, model_call_id, call_index, call_id, tool_name, origin, mcp_call_id FROM tool_calls ORDER BY id LIMIT ?`,
		"tool_responses": `SELECT timestamp, model_call_id, call_id, is_error, substr(content_preview, 1, 60) AS content
			FROM tool_responses ORDER BY id LIMIT ?`,
		"agent_events":     `SELECT timestamp, state, count, detail FROM agent_events ORDER BY id LIMIT ?`,
		"recording_events": `SELECT timestamp, state, count, detail FROM recording_events ORDER BY id LIMIT ?`,
	}
	for t, q := range previews {
		if r.Preview[t], err = lines(db, q, n); err != nil {
			return r, err
		}
	}
	if r.Denied, err = lines(db, `SELECT reason, transport, coalesce(domain, ip, '') AS target, port, sum(count) AS n
		FROM net_events WHERE decision = 'denied' GROUP BY reason, transport, target, port ORDER BY n DESC, reason LIMIT ?`, n); err != nil {
		return r, err
	}
	if r.TopDomain, err = lines(db, `SELECT domain, count(*) AS flows, sum(bytes_sent) AS sent, sum(bytes_received) AS received
		FROM net_events WHERE domain IS NOT NULL AND decision = 'allowed' GROUP BY domain ORDER BY flows DESC, domain LIMIT ?`, n); err != nil {
		return r, err
	}
	for _, q := range []struct{ name, sql string }{
		{"no orphaned tool_calls", `SELECT count(*) FROM tool_calls WHERE model_call_id IS NOT NULL AND model_call_id NOT IN (SELECT id FROM model_calls)`},
		{"no orphaned tool_responses", `SELECT count(*) FROM tool_responses WHERE model_call_id IS NOT NULL AND model_call_id NOT IN (SELECT id FROM model_calls)`},
		{"no foreign-key violations", `SELECT count(*) FROM pragma_foreign_key_check`},
	} {
		var bad int64
		if err := db.QueryRowContext(context.Background(), q.sql).Scan(&bad); err != nil {
			return r, err
		}
		r.Checks = append(r.Checks, Check{Name: q.name, OK: bad == 0, Detail: detailCount(bad)})
	}
	// A tool result answers a tool call of the same session: the model
	// asked for it in an earlier response. Results without a call id (a
	// provider that does not give one) cannot be matched and are not
	// counted. A session that resumes a conversation cut mid-tool in an
	// earlier session fails this check too, rightly: its calls are not here.
	// The calls are joined as a distinct set, indexed on the fly. A
	// correlated NOT EXISTS searched the call_id index per response, n²
	// for a file whose calls share one call_id in another session: 20,000
	// of each (a 5 MiB file) took 42 s of CPU that way and 24 ms this way
	// (sqlite3 3.40), and the time grows with the square.
	nUnanswered, unanswered, err := firstLines(db, shownFailures, `SELECT r.call_id FROM tool_responses r
		LEFT JOIN (SELECT DISTINCT session_id, call_id FROM tool_calls) c ON c.session_id = r.session_id AND c.call_id = r.call_id
		WHERE r.call_id IS NOT NULL AND c.call_id IS NULL
		ORDER BY r.id`)
	if err != nil {
		return r, err
	}
	r.Checks = append(r.Checks, Check{Name: "every tool response answers a tool call", OK: nUnanswered == 0,
		Detail: detailList(nUnanswered, unanswered, "call_id=")})
	// The exporter links a tool call with origin mcp to the tools/call of
	// its execution (sqliteexport's mcplink.go): the MCP call must be of
	// the same session and of the tool the model named — TOOL of
	// mcp__SERVER__TOOL, or the whole name — and carried one tool call.
	nMislinked, mislinked, err := firstLines(db, shownFailures, `SELECT c.tool_name || ' -> ' || coalesce(m.tool_name, '?') AS link FROM tool_calls c
		LEFT JOIN mcp_calls m ON m.id = c.mcp_call_id
		WHERE c.mcp_call_id IS NOT NULL AND (m.id IS NULL OR m.session_id IS NOT c.session_id OR m.method IS NOT 'tools/call'
			OR m.tool_name IS NULL OR NOT (c.tool_name = m.tool_name OR (substr(c.tool_name, 1, 5) = 'mcp__'
				AND instr(substr(c.tool_name, 6), '__') > 1
				AND substr(c.tool_name, 6 + instr(substr(c.tool_name, 6), '__') + 1) = m.tool_name)))
		ORDER BY c.id`)
	if err != nil {
		return r, err
	}
	r.Checks = append(r.Checks, Check{Name: "every mcp_call_id names a tools/call of its tool", OK: nMislinked == 0,
		Detail: detailList(nMislinked, mislinked, "link=")})
	nTwice, twice, err := firstLines(db, shownFailures, `SELECT mcp_call_id FROM tool_calls WHERE mcp_call_id IS NOT NULL
		GROUP BY mcp_call_id HAVING count(*) > 1 ORDER BY mcp_call_id`)
	if err != nil {
		return r, err
	}
	r.Checks = append(r.Checks, Check{Name: "no MCP call linked to two tool calls", OK: nTwice == 0,
		Detail: detailList(nTwice, twice, "mcp_call_id=")})
	nMismatched, mismatched, err := providerMismatches(db)
	if err != nil {
		return r, err
	}
	r.Checks = append(r.Checks, Check{Name: ProviderCheck, OK: nMismatched == 0, Detail: detailList(nMismatched, mismatched, "")})
	return r, nil
}

// ProviderCheck is the name of the check of model_calls.provider.
const ProviderCheck = "model_calls provider matches the API called"

// providerMismatches counts the distinct (provider, domain, method, path)
// of model_calls that the MITM's parser would not have recorded so, and
// describes the first few. The rule is the parser's own, provider.Detect:
// the API is told by the method and path, on whatever host serves it — a
// self-hosted OpenAI-compatible server is "openai" as api.openai.com is
// — and the call was seen on a host.
func providerMismatches(db sqliteexport.Querier) (int64, []string, error) {
	rows, err := db.QueryContext(context.Background(), `SELECT DISTINCT coalesce(provider, ''), coalesce(domain, ''),
		coalesce(method, ''), coalesce(path, '') FROM model_calls`)
	if err != nil {
		return 0, nil, fmt.Errorf("SELECT: %w", err)
	}
	defer rows.Close()
	var n int64
	var first []string
	for rows.Next() {
		var prov, domain, method, path string
		if err := rows.Scan(&prov, &domain, &method, &path); err != nil {
			return 0, nil, err
		}
		if c := provider.Detect(domain, method, path); domain != "" && c != nil && c.Provider() == prov {
			continue
		}
		if n++; len(first) < shownFailures {
			desc := fmt.Sprintf("%q on %q", prov, domain) // escaped when printed
			if method != "" || path != "" {
				desc += " " + method + " " + path
			}
			first = append(first, desc)
		}
	}
	return n, first, rows.Err()
}

// detailList is the count n of the rows of a failed check and the first
// of them, first, each without its column's prefix.
func detailList(n int64, first []string, prefix string) string {
	detail := detailCount(n)
	for i, l := range first {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		detail += sep + strings.TrimPrefix(l, prefix)
	}
	if n > int64(len(first)) {
		detail += ", …"
	}
	return detail
}

func detailCount(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d rows", n)
}
