package mcpserve

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NameArgs names one sandbox.
type NameArgs struct {
	Name string `json:"name" jsonschema:"the sandbox's name: 1 to 63 of a-z, 0-9 and -, starting with the server's prefix (see its instructions)"`
}

// StartResult is what sandbox_start did.
type StartResult struct {
	Name    string `json:"name"`
	State   string `json:"state" jsonschema:"running"`
	Created bool   `json:"created" jsonschema:"true when this call created the sandbox"`
	Already bool   `json:"already_running" jsonschema:"true when it was running already"`
}

// LsResult lists sandboxes.
type LsResult struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// Done says what a stop or rm did.
type Done struct {
	Name  string `json:"name"`
	State string `json:"state" jsonschema:"stopped, or removed"`
}

func (s *server) find(ctx context.Context, name string) (*Sandbox, error) {
	all, err := s.life.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Name == name {
			return &all[i], nil
		}
	}
	return nil, nil
}

// createArgs are capsem start's flags for a sandbox this server creates:
// the user's, never the model's.
func (s *server) createArgs() []string {
	args := []string{}
	if s.cfg.Policy != "" {
		args = append(args, "--policy", s.cfg.Policy)
	}
	if s.cfg.Workspace != "" {
		args = append(args, "--workspace", s.cfg.Workspace)
	}
	for _, sec := range s.cfg.Secrets {
		args = append(args, "--secret", sec)
	}
	return args
}

func (s *server) start(ctx context.Context, _ *mcp.CallToolRequest, in NameArgs) (*mcp.CallToolResult, StartResult, error) {
	if err := s.cfg.checkName(in.Name); err != nil {
		return nil, StartResult{}, err
	}
	sb, err := s.find(ctx, in.Name)
	if err != nil {
		return nil, StartResult{}, err
	}
	out := StartResult{Name: in.Name, State: "running"}
	switch {
	case sb != nil && sb.State == "running":
		out.Already = true
	case sb != nil:
		err = s.life.Start(ctx, in.Name, nil)
	case !s.cfg.AllowCreate:
		return nil, out, fmt.Errorf("no sandbox %s, and this server may not create sandboxes (its user did not give --allow-create): "+
			"sandbox_ls lists the ones there are", in.Name)
	default:
		out.Created = true
		err = s.life.Start(ctx, in.Name, s.createArgs())
	}
	if err != nil {
		return nil, StartResult{}, err
	}
	msg := "sandbox " + in.Name + " is running"
	switch {
	case out.Created:
		msg = "sandbox " + in.Name + " was created and is running"
	case out.Already:
		msg = "sandbox " + in.Name + " was running already"
	}
	return &mcp.CallToolResult{Content: text(msg)}, out, nil
}

func (s *server) ls(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, LsResult, error) {
	all, err := s.life.List(ctx)
	if err != nil {
		return nil, LsResult{}, err
	}
	out := LsResult{Sandboxes: []Sandbox{}}
	var b strings.Builder
	for _, sb := range all {
		if !strings.HasPrefix(sb.Name, s.cfg.Prefix) {
			continue
		}
		out.Sandboxes = append(out.Sandboxes, sb)
		fmt.Fprintf(&b, "%s\t%s\n", sb.Name, sb.State)
	}
	if len(out.Sandboxes) == 0 {
		fmt.Fprintf(&b, "no sandboxes named %s…\n", s.cfg.Prefix)
	}
	return &mcp.CallToolResult{Content: text(b.String())}, out, nil
}

func (s *server) stop(ctx context.Context, _ *mcp.CallToolRequest, in NameArgs) (*mcp.CallToolResult, Done, error) {
	if err := s.cfg.checkName(in.Name); err != nil {
		return nil, Done{}, err
	}
	if err := s.life.Stop(ctx, in.Name); err != nil {
		return nil, Done{}, err
	}
	return &mcp.CallToolResult{Content: text("sandbox " + in.Name + " is stopped")}, Done{Name: in.Name, State: "stopped"}, nil
}

func (s *server) rm(ctx context.Context, _ *mcp.CallToolRequest, in NameArgs) (*mcp.CallToolResult, Done, error) {
	if err := s.cfg.checkName(in.Name); err != nil {
		return nil, Done{}, err
	}
	if !s.cfg.AllowCreate {
		return nil, Done{}, fmt.Errorf("this server may not remove sandboxes (its user did not give --allow-create): sandbox_stop stops one")
	}
	if err := s.life.Remove(ctx, in.Name); err != nil {
		return nil, Done{}, err
	}
	return &mcp.CallToolResult{Content: text("sandbox " + in.Name + " is removed")}, Done{Name: in.Name, State: "removed"}, nil
}
