package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A command run through the API (the Python client's way, here raw HTTP
// on the sandbox's socket) gets TERM and LANG as one run by capsem exec
// does: the defaults are applied where every command goes through. Before,
// only the CLI added them, and an API exec saw neither.
func TestSandboxExecEnvDefaults(t *testing.T) {
	e := newSBEnv(t)
	e.start("env")
	const show = `echo "TERM=$TERM LANG=$LANG"`
	hc := e.apiClient("env")
	apiExec := func(tty bool) string {
		body, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", show}, "tty": tty})
		resp, err := hc.Post("http://capsem/v1/exec", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Stdout   string `json:"stdout"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.ExitCode != 0 {
			t.Fatalf("POST /v1/exec: %s, %+v, %v", resp.Status, out, err)
		}
		return strings.TrimSpace(out.Stdout)
	}
	// capsem exec from a host environment without TERM and LANG.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "LANG=") {
			env = append(env, kv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, "exec", "--data", e.data, "--no-tty", "env", "--", "sh", "-c", show)
	cmd.Env = env
	cli, err := cmd.Output()
	if err != nil {
		t.Fatalf("capsem exec: %v", err)
	}
	for _, tc := range []struct {
		got, want, why string
	}{
		{strings.TrimSpace(string(cli)), "TERM=dumb LANG=C.UTF-8", "capsem exec, pipes"},
		{apiExec(false), "TERM=dumb LANG=C.UTF-8", "the API, pipes: as capsem exec"},
		{apiExec(true), "TERM=xterm-256color LANG=C.UTF-8", "the API, a pty"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.why, tc.got, tc.want)
		}
	}
}
