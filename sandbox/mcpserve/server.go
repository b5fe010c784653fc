package mcpserve

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/version"
)

// server holds what the tools share.
type server struct {
	cfg  Config
	life Lifecycle
}

// New is the MCP server of cfg, its sandboxes' lives through life.
func New(cfg Config, life Lifecycle, log *slog.Logger) (*mcp.Server, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	s := &server{cfg: cfg.withDefaults(), life: life}
	srv := mcp.NewServer(&mcp.Implementation{Name: "capsem", Title: "capsem sandboxes", Version: version.Number},
		&mcp.ServerOptions{Logger: log, Instructions: s.instructions()})
	s.addTools(srv)
	return srv, nil
}

// instructions tell the model what it may do here, as the user set it.
func (s *server) instructions() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Each tool acts on a capsem sandbox: a Linux VM whose only way out is capsem's network filter, "+
		"its policy set by the user. Sandbox names start with %q. ", s.cfg.Prefix)
	if s.cfg.AllowCreate {
		b.WriteString("sandbox_start creates a sandbox the first time and starts it again later (its disk is kept until sandbox_rm). ")
		fmt.Fprintf(&b, "Secrets for the sandboxes it creates: %s. ", s.offered())
	} else {
		b.WriteString("This server may not create or remove sandboxes: sandbox_start starts the ones that exist (sandbox_ls lists them). ")
	}
	fmt.Fprintf(&b, "sandbox_exec runs a shell command and returns at most %d bytes of each of stdout and stderr. "+
		"A connection the policy refuses fails in the sandbox; sandbox_events lists what was refused first.", s.cfg.MaxOutput)
	return b.String()
}

// client is the API client of running sandbox name, or an error that
// says what to do.
func (s *server) client(name string) (*api.Client, error) {
	if err := s.cfg.checkName(name); err != nil {
		return nil, err
	}
	d := home.New(s.cfg.Data, name)
	if !d.Exists() {
		return nil, fmt.Errorf("no sandbox %s: sandbox_start creates it", name)
	}
	sock := d.SocketPath()
	if !d.Locked() {
		return nil, fmt.Errorf("sandbox %s is not running: sandbox_start starts it", name)
	}
	if _, err := os.Stat(sock); err != nil {
		return nil, fmt.Errorf("sandbox %s is starting or stopping (no API socket yet): try again in a moment", name)
	}
	return api.NewClient(sock), nil
}

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

func (s *server) addTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{
		Name: "sandbox_start",
		Description: "Start a sandbox by name, creating it the first time when this server may (see the server's instructions). " +
			"Returns once its guest answers. A sandbox keeps its disk between starts.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, OpenWorldHint: new(false)},
	}, s.start)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "sandbox_exec",
		Description: "Run a shell command (sh -c) in a running sandbox and wait for it. Returns the exit code and stdout and " +
			"stderr, each cut at the server's limit (the result says when). Exit code 124: the command timed out.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: new(false)},
	}, s.exec)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "sandbox_write_file",
		Description: "Write a file in a running sandbox (its directory is made first); content is text, or base64 with base64 set.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, OpenWorldHint: new(false)},
	}, s.writeFile)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "sandbox_read_file",
		Description: "Read a file of a running sandbox: text when it is UTF-8, else base64; cut at the server's limit (the " +
			"result says when).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, s.readFile)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "sandbox_ls",
		Description: "List the sandboxes this server may use, with their state (running, stopped, suspended, crashed).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, s.ls)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "sandbox_stop",
		Description: "Stop a sandbox: its guest is powered off; its disk and settings are kept for the next sandbox_start.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)},
	}, s.stop)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "sandbox_rm",
		Description: "Remove a sandbox and its disk (it is stopped first). Its recorded events stay in capsem's store.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), IdempotentHint: true, OpenWorldHint: new(false)},
	}, s.rm)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "sandbox_events",
		Description: "What a running sandbox's session recorded — DNS answers, connections, HTTP requests, model calls, " +
			"commands — as rows of capsem's export: the denied ones first (why a command's network access failed: " +
			"their reason and the rule), then the others, newest first.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}, s.events)
}
