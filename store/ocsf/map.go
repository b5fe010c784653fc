package ocsf

import (
	"fmt"
	"net/netip"
	"path"
	"strings"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/sqliteexport"
)

// obj is an OCSF object as written: encoding/json sorts its keys, so the
// output is the same for the same events.
type obj = map[string]any

// OCSF 1.8.0 identifiers this package writes (the schema's enums).
const (
	catSystem  = 1
	catNetwork = 4

	classFile    = 1001
	classProcess = 1007
	classNetwork = 4001
	classHTTP    = 4002
	classDNS     = 4003

	sevInformational = 1
	sevMedium        = 3 // a denial: the policy stopped something the guest tried

	deviceVirtual = 6
)

// Class names, as Result.ByClass counts them.
var className = map[int]string{
	classFile: "file_activity", classProcess: "process_activity",
	classNetwork: "network_activity", classHTTP: "http_activity", classDNS: "dns_activity",
}

type mapper struct {
	scrub bool
	ph    *dlp.Scrubber
}

// text is s as written: scrubbed when asked.
func (m *mapper) text(s string) string {
	if m.scrub && s != "" {
		return m.ph.Scrub(s)
	}
	return s
}

// event maps ev to its OCSF event and class name; nil for a kind with no
// class here.
func (m *mapper) event(sess *store.Session, ev *store.Event) (obj, string) {
	var o obj
	var class int
	switch {
	case ev.DNS != nil:
		o, class = m.dns(ev.DNS), classDNS
	case ev.Net != nil && ev.Net.Method != "":
		o, class = m.request(ev.Net), classHTTP
	case ev.Net != nil:
		o, class = m.flow(ev.Net), classNetwork
	case ev.ModelCall != nil:
		o, class = m.modelCall(ev.ModelCall), classHTTP
	case ev.MCPCall != nil:
		o, class = m.mcpCall(ev.MCPCall), classHTTP
	case ev.Exec != nil:
		o, class = m.exec(sess, ev), classProcess
	case ev.FS != nil:
		o, class = m.fs(ev.FS), classFile
	default:
		return nil, ""
	}
	cat := catNetwork
	if class < 4000 {
		cat = catSystem
	}
	act := o["activity_id"].(int)
	o["class_uid"], o["category_uid"], o["type_uid"] = class, cat, class*100+act
	o["time"] = ev.Time.UnixMilli()
	if _, ok := o["severity_id"]; !ok {
		o["severity_id"] = sevInformational
	}
	o["metadata"] = obj{
		"version": Version, "product": product(), "log_name": "capsem",
		"uid":             fmt.Sprintf("%s/%d", sess.ID, ev.Seq), // the event's place in the store: session, seq
		"correlation_uid": sess.ID,
	}
	dev := obj{"type_id": deviceVirtual, "uid": sess.ID}
	if sess.Sandbox != "" {
		dev["name"] = sess.Sandbox
	}
	if sess.Host != "" {
		dev["hypervisor"] = "capsem on " + sess.Host
	}
	o["device"] = dev
	return o, className[class]
}

// decided sets what a decision says: action, disposition, severity, the
// rule, and the reason (no OCSF home: unmapped).
func (m *mapper) decided(o obj, d store.Decision, reason, rule string) {
	switch d {
	case store.Allowed:
		o["action_id"], o["disposition_id"] = 1, 1 // Allowed, Allowed
	case store.Denied:
		o["action_id"], o["disposition_id"], o["severity_id"] = 2, 2, sevMedium // Denied, Blocked
	}
	if rule != "" {
		o["firewall_rule"] = obj{"name": m.text(rule)}
	}
	if reason != "" {
		unmapped(o)["reason"] = m.text(reason)
	}
}

// unmapped is o's unmapped.capsem: what OCSF has no attribute for.
func unmapped(o obj) obj {
	u, ok := o["unmapped"].(obj)
	if !ok {
		u = obj{}
		o["unmapped"] = obj{"capsem": u}
		return u
	}
	return u["capsem"].(obj)
}

func endpoint(host string, ip netip.Addr, port uint16) obj {
	e := obj{}
	if host != "" {
		e["hostname"] = host
	}
	if ip.IsValid() {
		e["ip"] = ip.String()
	}
	if port != 0 {
		e["port"] = int(port)
	}
	if host == "" && !ip.IsValid() {
		e["name"] = "unknown" // OCSF wants an endpoint named somehow
	}
	return e
}

// connection is connection_info: the transport and the direction.
func connection(t store.Transport, d store.Direction) obj {
	c := obj{"protocol_name": string(t), "direction_id": direction(d)}
	switch t {
	case store.TransportTCP:
		c["protocol_num"] = 6
	case store.TransportUDP:
		c["protocol_num"] = 17
	}
	return c
}

func (m *mapper) dns(d *store.DNS) obj {
	o := obj{"activity_id": 6, // Traffic: the query and capsem's answer
		"query":        obj{"hostname": m.text(d.QName), "type": d.QType},
		"dst_endpoint": endpoint("", d.ResolverAsked, 53),
	}
	if d.Transport != "" {
		o["connection_info"] = connection(d.Transport, store.Outbound)
	}
	switch a := d.Answer; {
	case a == "NXDOMAIN":
		o["rcode_id"], o["rcode"] = 3, "NXDomain"
	case a == "REFUSED":
		o["rcode_id"], o["rcode"] = 5, "Refused"
	case a == "SERVFAIL":
		o["rcode_id"], o["rcode"] = 2, "ServFail"
	default:
		o["rcode_id"], o["rcode"] = 0, "NoError"
		if a != "" {
			o["answers"] = []obj{{"rdata": m.text(a), "type": d.QType}}
		}
	}
	if d.Count > 1 {
		o["count"] = d.Count
	}
	m.decided(o, d.Decision, d.Reason, d.MatchedRule)
	return o
}

func direction(d store.Direction) int {
	if d == store.Inbound {
		return 1
	}
	return 2 // Outbound: everything the guest opened
}

func (m *mapper) flow(n *store.Net) obj {
	act := 6 // Traffic: an allowed flow, recorded when it ended
	if n.Decision == store.Denied {
		act = 5 // Refuse
	}
	o := obj{"activity_id": act,
		"src_endpoint":    endpoint("", n.SrcIP, n.SrcPort),
		"dst_endpoint":    endpoint(m.text(n.Domain), n.IP, n.Port),
		"connection_info": connection(n.Transport, n.Direction),
	}
	if n.BytesSent != 0 || n.BytesReceived != 0 {
		o["traffic"] = obj{"bytes_out": n.BytesSent, "bytes_in": n.BytesReceived, "bytes": n.BytesSent + n.BytesReceived}
	}
	if n.Duration > 0 {
		o["duration"] = n.Duration.Milliseconds()
	}
	if n.Count > 1 {
		o["count"] = n.Count
	}
	m.decided(o, n.Decision, n.Reason, n.MatchedRule)
	m.netExtras(o, n)
	return o
}

// netExtras are a net event's fields without an OCSF home.
func (m *mapper) netExtras(o obj, n *store.Net) {
	u := unmapped(o)
	if n.ConnType != "" {
		u["conn_type"] = string(n.ConnType)
	}
	if n.Detail != "" {
		u["detail"] = m.text(n.Detail)
	}
	if len(u) == 0 {
		delete(o, "unmapped")
	}
}

// httpActivity is HTTP Activity's activity_id for a method.
func httpActivity(method string) int {
	switch strings.ToUpper(method) {
	case "CONNECT":
		return 1
	case "DELETE":
		return 2
	case "GET":
		return 3
	case "HEAD":
		return 4
	case "OPTIONS":
		return 5
	case "POST":
		return 6
	case "PUT":
		return 7
	case "TRACE":
		return 8
	case "PATCH":
		return 9
	}
	return 99
}

func (m *mapper) url(host, p, query string, port uint16) obj {
	u := obj{"scheme": "https", "path": m.text(p)}
	if p == "" {
		u["path"] = "/"
	}
	if host != "" {
		u["hostname"] = m.text(host)
	}
	if query != "" {
		u["query_string"] = m.text(query)
	}
	if port != 0 {
		u["port"] = int(port)
	}
	return u
}

// method sets http_request's http_method, one of OCSF's; another
// (PROPFIND) has no home there.
func (m *mapper) method(o, req obj, method string) {
	if httpActivity(method) != 99 {
		req["http_method"] = strings.ToUpper(method)
		return
	}
	unmapped(o)["method"] = m.text(method)
}

func (m *mapper) request(n *store.Net) obj {
	req := obj{"url": m.url(n.Domain, n.Path, n.Query, n.Port)}
	if n.HTTPVersion != "" {
		req["version"] = n.HTTPVersion
	}
	for _, h := range n.RequestHeaders {
		if strings.EqualFold(h.Name, "User-Agent") {
			req["user_agent"] = m.text(h.Value)
		}
	}
	o := obj{"activity_id": httpActivity(n.Method),
		"http_request": req,
		"src_endpoint": endpoint("", n.SrcIP, n.SrcPort),
		"dst_endpoint": endpoint(m.text(n.Domain), n.IP, n.Port),
	}
	m.method(o, req, n.Method)
	if n.StatusCode != 0 {
		o["http_response"] = obj{"code": n.StatusCode}
	}
	if n.BytesSent != 0 || n.BytesReceived != 0 {
		o["traffic"] = obj{"bytes_out": n.BytesSent, "bytes_in": n.BytesReceived, "bytes": n.BytesSent + n.BytesReceived}
	}
	if n.Duration > 0 {
		o["duration"] = n.Duration.Milliseconds()
	}
	m.decided(o, n.Decision, n.Reason, n.MatchedRule)
	m.netExtras(o, n)
	return o
}

func (m *mapper) modelCall(c *store.ModelCall) obj {
	req := obj{"url": m.url(c.Domain, c.Path, "", 0)}
	o := obj{"activity_id": httpActivity(c.Method),
		"http_request": req,
		"dst_endpoint": endpoint(m.text(c.Domain), netip.Addr{}, 0),
	}
	m.method(o, req, c.Method)
	if c.StatusCode != 0 {
		o["http_response"] = obj{"code": c.StatusCode}
	}
	if c.Duration > 0 {
		o["duration"] = c.Duration.Milliseconds()
	}
	u := unmapped(o)
	u["kind"] = string(store.KindModelCall)
	for k, v := range map[string]any{"provider": c.Provider, "model": m.text(c.Model), "stop_reason": c.StopReason,
		"message_id": c.MessageID, "trace_id": c.TraceID} {
		if v != "" {
			u[k] = v
		}
	}
	u["input_tokens"], u["output_tokens"], u["estimated_cost_usd"] = c.InputTokens, c.OutputTokens, c.CostUSD
	if len(c.ToolCalls) > 0 {
		var names []string
		for _, tc := range c.ToolCalls {
			names = append(names, m.text(tc.Name))
		}
		u["tool_calls"] = names
	}
	return o
}

func (m *mapper) mcpCall(c *store.MCPCall) obj {
	o := obj{"activity_id": 6, // Post: a JSON-RPC message
		"http_request": obj{"http_method": "POST", "url": obj{"url_string": m.text(c.ServerName)}},
	}
	if c.Duration > 0 {
		o["duration"] = c.Duration.Milliseconds()
	}
	if host, _, _ := strings.Cut(c.ServerName, "/"); strings.Contains(host, ".") {
		o["dst_endpoint"] = endpoint(m.text(host), netip.Addr{}, 0)
	}
	m.decided(o, c.Decision, c.Reason, c.MatchedRule)
	u := unmapped(o)
	u["kind"], u["mcp_method"] = string(store.KindMCPCall), m.text(c.Method)
	for k, v := range map[string]string{"tool_name": c.ToolName, "request_id": c.RequestID, "error_message": c.ErrorMessage} {
		if v != "" {
			u[k] = m.text(v)
		}
	}
	return o
}

func (m *mapper) exec(sess *store.Session, ev *store.Event) obj {
	x := ev.Exec
	p := obj{"uid": fmt.Sprintf("%s/%d", sess.ID, ev.Seq)}
	if x.PID > 0 {
		p["pid"] = x.PID
	}
	if len(x.Argv) > 0 {
		p["cmd_line"] = m.text(sqliteexport.ShellJoin(x.Argv))
		p["name"] = m.text(path.Base(x.Argv[0]))
	} else {
		p["name"] = "(interactive shell)"
	}
	if x.Dir != "" {
		p["working_directory"] = m.text(x.Dir)
	}
	if !x.Start.IsZero() {
		p["created_time"] = x.Start.UnixMilli()
		p["terminated_time"] = x.Start.Add(x.Duration).UnixMilli()
	}
	o := obj{"activity_id": 2, // Terminate: recorded when the command ended, with its exit
		"process":   p,
		"actor":     obj{"app_name": "capsem"}, // the host ran it (capsem exec, run)
		"exit_code": x.ExitCode,
	}
	if x.Signal != "" {
		unmapped(o)["signal"] = x.Signal
	}
	if x.TTY {
		unmapped(o)["tty"] = true
	}
	return o
}

func (m *mapper) fs(f *store.FS) obj {
	file := func(p string) obj {
		t := 1 // Regular File
		if f.Dir {
			t = 2 // Folder
		}
		o := obj{"name": m.text(path.Base(p)), "path": m.text(p), "type_id": t}
		if f.Size > 0 {
			o["size"] = f.Size
		}
		return o
	}
	act := 0
	switch f.Action {
	case store.FSCreated:
		act = 1
	case store.FSModified:
		act = 3 // Update
	case store.FSDeleted:
		act = 4
	case store.FSRenamed:
		act = 5
	case store.FSOverflow:
		act = 99 // changes under the path went unrecorded
	}
	o := obj{"activity_id": act, "file": file(f.Path),
		// The guest agent reported it: the guest's claim, not the host's record.
		"actor": obj{"app_name": "capsem-agent"},
	}
	if f.Action == store.FSRenamed {
		o["file"], o["file_result"] = file(f.OldPath), file(f.Path)
	}
	u := unmapped(o)
	u["action"] = f.Action
	if !f.GuestTime.IsZero() {
		u["guest_time"] = f.GuestTime.UnixMilli()
	}
	return o
}
