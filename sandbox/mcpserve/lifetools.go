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

// StartArgs names the sandbox to start and, for one it creates, the
// secrets it gets.
type StartArgs struct {
	Name    string   `json:"name" jsonschema:"the sandbox's name: 1 to 63 of a-z, 0-9 and -, starting with the server's prefix (see its instructions)"`
	Secrets []string `json:"secrets,omitempty" jsonschema:"for a sandbox this call creates: the names of the secrets it gets, among those the server offers (see its instructions); its commands see a placeholder, the real value goes only to the secret's hosts. Default: all of them"`
}

// StartResult is what sandbox_start did.
type StartResult struct {
	Name    string   `json:"name"`
	State   string   `json:"state" jsonschema:"running"`
	Created bool     `json:"created" jsonschema:"true when this call created the sandbox"`
	Already bool     `json:"already_running" jsonschema:"true when it was running already"`
	Secrets []string `json:"secrets,omitempty" jsonschema:"the secrets given to the sandbox this call created"`
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

// secretName is a --secret spec's NAME.
func secretName(spec string) string { name, _, _ := strings.Cut(spec, "@"); return name }

// pickSecrets are the user's --secret specs the model named (all when it
// named none). A model picks among the user's secrets by name only: the
// hosts a secret's value may go to are the user's, since a secret's hosts
// are also allowed by it.
func (s *server) pickSecrets(names []string) ([]string, error) {
	if len(names) == 0 {
		return s.cfg.Secrets, nil
	}
	var picked []string
	for _, n := range names {
		found := ""
		for _, spec := range s.cfg.Secrets {
			if secretName(spec) == n {
				found = spec
			}
		}
		if found == "" {
			return nil, fmt.Errorf("secret %q is not one this server offers (%s)", n, s.offered())
		}
		picked = append(picked, found)
	}
	return picked, nil
}

// offered says which secrets the server offers, by name.
func (s *server) offered() string {
	if len(s.cfg.Secrets) == 0 {
		return "it offers none: its user gives them with --secret"
	}
	names := make([]string, len(s.cfg.Secrets))
	for i, spec := range s.cfg.Secrets {
		names[i] = secretName(spec)
	}
	return "it offers " + strings.Join(names, ", ")
}

// createArgs are capsem start's flags for a sandbox this server creates:
// the user's policy and workspace, the secrets picked among the user's.
func (s *server) createArgs(secrets []string) []string {
	args := []string{}
	if s.cfg.Policy != "" {
		args = append(args, "--policy", s.cfg.Policy)
	}
	if s.cfg.Workspace != "" {
		args = append(args, "--workspace", s.cfg.Workspace)
	}
	for _, sec := range secrets {
		args = append(args, "--secret", sec)
	}
	return args
}

func (s *server) start(ctx context.Context, _ *mcp.CallToolRequest, in StartArgs) (*mcp.CallToolResult, StartResult, error) {
	if err := s.cfg.checkName(in.Name); err != nil {
		return nil, StartResult{}, err
	}
	secrets, err := s.pickSecrets(in.Secrets)
	if err != nil {
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
	case sb != nil && len(in.Secrets) > 0:
		return nil, out, fmt.Errorf("sandbox %s exists: it keeps the secrets it was created with; secrets are for a sandbox sandbox_start creates", in.Name)
	case sb != nil:
		err = s.life.Start(ctx, in.Name, nil)
	case !s.cfg.AllowCreate:
		return nil, out, fmt.Errorf("no sandbox %s, and this server may not create sandboxes (its user did not give --allow-create): "+
			"sandbox_ls lists the ones there are", in.Name)
	default:
		out.Created = true
		for _, spec := range secrets {
			out.Secrets = append(out.Secrets, secretName(spec))
		}
		err = s.life.Start(ctx, in.Name, s.createArgs(secrets))
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
