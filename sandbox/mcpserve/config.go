package mcpserve

import (
	"fmt"
	"strings"
	"time"

	"github.com/capsem/capsem/sandbox/home"
)

// Config is what the host user decided for the server's life.
type Config struct {
	// Data is capsem's data directory (required: where the sandboxes are).
	Data string
	// Prefix is what every sandbox name the server touches starts with;
	// "" is DefaultPrefix. A name without it is refused: the server
	// never reaches a sandbox of the user's own.
	Prefix string
	// AllowCreate lets sandbox_start create sandboxes and sandbox_rm
	// remove them; false: the model starts, uses and stops sandboxes that
	// exist under the prefix.
	AllowCreate bool
	// Policy is the policy file of the sandboxes created ("": capsem's
	// default policy, the AI providers' APIs only).
	Policy string
	// Secrets are the --secret specs of the sandboxes created ("NAME" or
	// "NAME@HOST,…"; the values from the server's environment).
	Secrets []string
	// Workspace is the host directory the sandboxes created share as
	// /workspace ("": capsem start's default, the server's working
	// directory).
	Workspace string
	// MaxOutput caps what sandbox_exec returns of each of stdout and
	// stderr, in bytes (0: DefaultMaxOutput); the rest is counted and
	// dropped, and the result says so.
	MaxOutput int
	// MaxFile caps a file written or read, in bytes (0: DefaultMaxFile).
	MaxFile int
	// ExecTimeout is a command's time when the call gives none (0:
	// DefaultExecTimeout); MaxExecTimeout the most a call may ask for (0:
	// DefaultMaxExecTimeout).
	ExecTimeout, MaxExecTimeout time.Duration
}

// The defaults of Config's zero values.
const (
	DefaultPrefix         = "mcp-"
	DefaultMaxOutput      = 64 << 10
	DefaultMaxFile        = 1 << 20
	DefaultExecTimeout    = 2 * time.Minute
	DefaultMaxExecTimeout = time.Hour
	// maxEvents is the most sandbox_events returns in one call.
	maxEvents = 500
)

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
	if c.MaxFile <= 0 {
		c.MaxFile = DefaultMaxFile
	}
	if c.ExecTimeout <= 0 {
		c.ExecTimeout = DefaultExecTimeout
	}
	if c.MaxExecTimeout <= 0 {
		c.MaxExecTimeout = DefaultMaxExecTimeout
	}
	return c
}

// Check says what is wrong with c, if anything.
func (c Config) Check() error {
	c = c.withDefaults()
	if c.Data == "" {
		return fmt.Errorf("mcpserve: no data directory")
	}
	if !home.NameRule.MatchString(c.Prefix + "x") {
		return fmt.Errorf("mcpserve: prefix %q: a sandbox name is [a-z0-9][a-z0-9-]{0,62}, so the prefix must start with a letter or digit and hold only those and -", c.Prefix)
	}
	return nil
}

// checkName refuses a name outside the prefix, saying what would do.
func (c Config) checkName(name string) error {
	if !strings.HasPrefix(name, c.Prefix) {
		return fmt.Errorf("sandbox %q is not one this server may use: its sandboxes' names start with %q (try %q)", name, c.Prefix, c.Prefix+strings.TrimPrefix(name, "-"))
	}
	if err := home.CheckName(name); err != nil {
		return err
	}
	return nil
}
