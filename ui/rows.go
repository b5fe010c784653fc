package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/capsem/capsem/store"
)

// The kinds of row the timeline shows, each with its colour (app.css
// .k-NAME) and icon. A model call event is one "model" row and one "tool"
// row per tool call the model made; an HTTP request is a net event with a
// method, shown apart from flows and drops.
const (
	rowDNS       = "dns"
	rowFlow      = "flow"
	rowHTTP      = "http"
	rowModel     = "model"
	rowTool      = "tool"
	rowMCP       = "mcp"
	rowExec      = "exec"
	rowFS        = "fs"
	rowAgent     = "agent"
	rowRecording = "recording"
	rowOther     = "other"
)

// rowKinds are the kinds in the order the filter lists them.
var rowKinds = []string{rowDNS, rowFlow, rowHTTP, rowModel, rowTool, rowMCP, rowExec, rowFS, rowAgent, rowRecording, rowOther}

var rowIcons = map[string]string{
	rowDNS: "?", rowFlow: "⇄", rowHTTP: "↗", rowModel: "✦", rowTool: "⚙", rowMCP: "⌁",
	rowExec: "$", rowFS: "▤", rowAgent: "!", rowRecording: "●", rowOther: "·",
}

// row is one line of a session's timeline.
type row struct {
	Seq      uint64
	Time     time.Time
	Kind     string
	Title    string // what happened, in a line
	Host     string // the name or address it concerns, for the host filter
	Decision string // allowed, denied, or "" when nothing was decided
	Reason   string
	Rule     string // the policy rule that decided
	Detail   string // more, shown smaller
	Link     bool   // the event has a page of its own (model calls)
}

func (r row) Icon() string { return rowIcons[r.Kind] }

// text is what the search looks in.
func (r row) text() string {
	return strings.ToLower(strings.Join([]string{r.Kind, r.Title, r.Host, r.Decision, r.Reason, r.Rule, r.Detail}, "\x00"))
}

// rowsOf turns one event into its rows.
func rowsOf(ev *store.Event) []row {
	base := row{Seq: ev.Seq, Time: ev.Time, Kind: rowOther, Title: string(ev.Kind)}
	switch {
	case ev.DNS != nil:
		d := ev.DNS
		base.Kind, base.Host = rowDNS, d.QName
		base.Title = fmt.Sprintf("%s %s → %s", d.QType, d.QName, d.Answer)
		base.Decision, base.Reason, base.Rule = string(d.Decision), d.Reason, d.MatchedRule
		base.Detail = countText(d.Count)
	case ev.Net != nil:
		n := ev.Net
		base.Host = netHost(n)
		base.Decision, base.Reason, base.Rule = string(n.Decision), n.Reason, n.MatchedRule
		if n.Method != "" {
			base.Kind = rowHTTP
			base.Title = strings.TrimSpace(fmt.Sprintf("%s https://%s%s %s", n.Method, base.Host, n.Path, statusText(n.StatusCode)))
			base.Detail = join(n.HTTPVersion, bytesText(n.BytesSent, n.BytesReceived), n.Detail)
		} else {
			base.Kind = rowFlow
			base.Title = strings.TrimSpace(fmt.Sprintf("%s %s:%d %s", n.Transport, base.Host, n.Port, n.ConnType))
			base.Detail = join(bytesText(n.BytesSent, n.BytesReceived), countText(n.Count), n.Detail)
		}
	case ev.ModelCall != nil:
		m := ev.ModelCall
		base.Kind, base.Host, base.Link = rowModel, m.Domain, true
		base.Title = fmt.Sprintf("%s %s: %d in / %d out tokens, %s", m.Provider, m.Model, m.InputTokens, m.OutputTokens, costText(m.CostUSD))
		base.Detail = join(m.StopReason, preview(m.TextContent, 160))
		out := []row{base}
		for _, tc := range m.ToolCalls {
			t := row{Seq: ev.Seq, Time: ev.Time, Kind: rowTool, Host: m.Domain, Link: true,
				Title: fmt.Sprintf("%s(%s)", tc.Name, preview(tc.Arguments, 200)), Detail: join(tc.Origin, tc.CallID)}
			out = append(out, t)
		}
		return out
	case ev.MCPCall != nil:
		c := ev.MCPCall
		base.Kind, base.Host = rowMCP, c.ServerName
		base.Title = strings.TrimSpace(fmt.Sprintf("%s %s %s", c.ServerName, c.Method, c.ToolName))
		base.Decision, base.Reason, base.Rule = string(c.Decision), c.Reason, c.MatchedRule
		base.Detail = join(c.ErrorMessage, preview(c.RequestPreview, 160))
	case ev.Exec != nil:
		x := ev.Exec
		base.Kind = rowExec
		cmd := strings.Join(x.Argv, " ")
		if cmd == "" {
			cmd = "(interactive shell)"
		}
		base.Title = preview(cmd, 300)
		base.Detail = join(fmt.Sprintf("exit %d", x.ExitCode), x.Signal, x.Duration.Round(time.Millisecond).String())
	case ev.FS != nil:
		f := ev.FS
		base.Kind = rowFS
		base.Title = f.Action + " " + f.Path
		if f.OldPath != "" {
			base.Title += " (was " + f.OldPath + ")"
		}
		if f.Size > 0 {
			base.Detail = fmt.Sprintf("%d bytes", f.Size)
		}
	case ev.Agent != nil:
		base.Kind = rowAgent
		base.Title = "guest agent: " + ev.Agent.State
		base.Detail = join(countText(ev.Agent.Count), ev.Agent.Detail)
	case ev.Recording != nil:
		base.Kind = rowRecording
		base.Title = "recording: " + ev.Recording.State
		base.Detail = join(countText(ev.Recording.Count), ev.Recording.Detail)
	}
	return []row{base}
}

// netHost is the name a net event concerns, or its address.
func netHost(n *store.Net) string {
	if n.Domain != "" {
		return n.Domain
	}
	if n.IP.IsValid() {
		return n.IP.String()
	}
	return ""
}

func countText(n int64) string {
	if n > 1 {
		return fmt.Sprintf("×%d", n)
	}
	return ""
}

func statusText(code int) string {
	if code == 0 {
		return ""
	}
	return fmt.Sprint(code)
}

func bytesText(sent, received int64) string {
	if sent == 0 && received == 0 {
		return ""
	}
	return fmt.Sprintf("↑%s ↓%s", store.FormatSize(sent), store.FormatSize(received))
}

func costText(usd float64) string {
	if usd == 0 {
		return "$0"
	}
	if usd < 1 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// preview cuts s to n bytes on a rune boundary, with an ellipsis.
func preview(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xc0 != 0x80 }

// join joins the non-empty parts with " · ".
func join(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " · ")
}
