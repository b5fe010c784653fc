package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EventsArgs asks for a sandbox's events.
type EventsArgs struct {
	Name  string `json:"name" jsonschema:"the running sandbox"`
	Since int64  `json:"since,omitempty" jsonschema:"only events after this sequence number (each event's seq); 0: the whole session"`
	Limit int    `json:"limit,omitempty" jsonschema:"the most events to return, 1 to 500; 0: 50"`
}

// EventsResult is a sandbox's events, the denied ones first.
type EventsResult struct {
	Total  int              `json:"total" jsonschema:"how many events there were after since"`
	Denied int              `json:"denied" jsonschema:"how many of them were denied"`
	Events []map[string]any `json:"events" jsonschema:"the denied events, newest first, then the others, newest first: rows of capsem's export, the table in table, the order in seq"`
}

// ring keeps the last n items.
type ring struct {
	n     int
	items []map[string]any
}

func (r *ring) add(m map[string]any) {
	if len(r.items) == r.n {
		copy(r.items, r.items[1:])
		r.items = r.items[:r.n-1]
	}
	r.items = append(r.items, m)
}

func (s *server) events(ctx context.Context, _ *mcp.CallToolRequest, in EventsArgs) (*mcp.CallToolResult, EventsResult, error) {
	limit := in.Limit
	switch {
	case limit == 0:
		limit = 50
	case limit < 0 || limit > maxEvents:
		return nil, EventsResult{}, fmt.Errorf("limit %d: want 1 to %d", limit, maxEvents)
	}
	if in.Since < 0 {
		return nil, EventsResult{}, fmt.Errorf("since %d: want a sequence number, 0 for all", in.Since)
	}
	c, err := s.client(in.Name)
	if err != nil {
		return nil, EventsResult{}, err
	}
	defer c.Close()
	denied, others := &ring{n: limit}, &ring{n: limit}
	var out EventsResult
	err = c.Events(ctx, uint64(in.Since), false, func(raw json.RawMessage) error {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("mcpserve: an event: %w", err)
		}
		out.Total++
		if m["decision"] == "denied" {
			out.Denied++
			denied.add(m)
		} else {
			others.add(m)
		}
		return nil
	})
	if err != nil {
		return nil, EventsResult{}, err
	}
	// Newest first: what a model asks after a command failed is what
	// was refused last.
	out.Events = []map[string]any{}
	for i := len(denied.items) - 1; i >= 0; i-- {
		out.Events = append(out.Events, denied.items[i])
	}
	for i := len(others.items) - 1; i >= 0 && len(out.Events) < limit; i-- {
		out.Events = append(out.Events, others.items[i])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d events, %d denied; %d shown, the denied first, newest first:\n", out.Total, out.Denied, len(out.Events))
	for _, e := range out.Events {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
	}
	return &mcp.CallToolResult{Content: text(b.String())}, out, nil
}
