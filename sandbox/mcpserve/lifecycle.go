package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// Lifecycle starts, stops, removes and lists sandboxes. CLI is the one the
// server uses; a test may give another.
type Lifecycle interface {
	// Start starts sandbox name (creating it with args, capsem start's
	// flags, when it does not exist and args is not nil).
	Start(ctx context.Context, name string, args []string) error
	Stop(ctx context.Context, name string) error
	Remove(ctx context.Context, name string) error
	// List is `capsem ls --json`.
	List(ctx context.Context) ([]Sandbox, error)
}

// Sandbox is what `capsem ls --json` says of a sandbox, as far as the
// server shows it to a model.
type Sandbox struct {
	Name      string `json:"name"`
	State     string `json:"state" jsonschema:"running, stopped, suspended or crashed"`
	Created   string `json:"created,omitempty"`
	Started   string `json:"started,omitempty"`
	Policy    string `json:"policy,omitempty" jsonschema:"the sandbox's policy file; empty: capsem's default"`
	SessionID string `json:"session_id,omitempty" jsonschema:"the event store session of its current or last start"`
	Crash     string `json:"crash,omitempty" jsonschema:"why it crashed, when it did"`
}

// CLI runs the capsem binary Exe with --data Data (and --ca-dir CADir for
// start): creating a sandbox here is exactly `capsem start` — its
// preparation, the boot snapshot, the detached supervisor and the fallback
// to a cold boot —, one home for all of that.
type CLI struct {
	Exe, Data, CADir string
}

func (c CLI) run(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{args[0], "--data", c.Data}, args[1:]...)
	cmd := exec.CommandContext(ctx, c.Exe, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		msg = strings.TrimPrefix(msg, "capsem: ")
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("%s", msg)
	}
	return stdout.Bytes(), nil
}

func (c CLI) Start(ctx context.Context, name string, args []string) error {
	full := []string{"start"}
	if c.CADir != "" {
		full = append(full, "--ca-dir", c.CADir)
	}
	full = append(append(full, args...), name)
	_, err := c.run(ctx, full...)
	return err
}

func (c CLI) Stop(ctx context.Context, name string) error {
	_, err := c.run(ctx, "stop", name)
	return err
}

func (c CLI) Remove(ctx context.Context, name string) error {
	_, err := c.run(ctx, "rm", "--force", name)
	return err
}

func (c CLI) List(ctx context.Context) ([]Sandbox, error) {
	out, err := c.run(ctx, "ls", "--json")
	if err != nil {
		return nil, err
	}
	var all []Sandbox
	if err := json.Unmarshal(out, &all); err != nil {
		return nil, fmt.Errorf("mcpserve: capsem ls --json: %w", err)
	}
	return all, nil
}
