package mcpserve

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capsem/capsem/sandbox/api"
)

// ExecArgs is a command for sandbox_exec.
type ExecArgs struct {
	Name     string `json:"name" jsonschema:"the running sandbox to run it in"`
	Command  string `json:"command" jsonschema:"a shell command line, run with sh -c as root in the sandbox"`
	TimeoutS int    `json:"timeout_s,omitempty" jsonschema:"seconds before the command is killed (exit code 124); 0: the server's default"`
	Workdir  string `json:"workdir,omitempty" jsonschema:"the working directory; default /workspace"`
	Stdin    string `json:"stdin,omitempty" jsonschema:"text given to the command's standard input (default: none, closed)"`
}

// ExecResult is a finished command.
type ExecResult struct {
	ExitCode    int    `json:"exit_code" jsonschema:"the command's exit code; 124 after its timeout, 127 not found"`
	Stdout      string `json:"stdout" jsonschema:"its standard output, cut at the server's limit"`
	Stderr      string `json:"stderr" jsonschema:"its standard error, cut at the server's limit"`
	StdoutBytes int64  `json:"stdout_bytes" jsonschema:"how many bytes it wrote to stdout in all"`
	StderrBytes int64  `json:"stderr_bytes" jsonschema:"how many bytes it wrote to stderr in all"`
	Truncated   bool   `json:"truncated" jsonschema:"stdout or stderr is cut"`
	StdoutKept  int    `json:"stdout_kept" jsonschema:"how many bytes of stdout are in stdout"`
	StderrKept  int    `json:"stderr_kept" jsonschema:"how many bytes of stderr are in stderr"`
	TimedOut    bool   `json:"timed_out,omitempty"`
	Signal      string `json:"signal,omitempty" jsonschema:"the signal that ended it, if one did"`
	Error       string `json:"error,omitempty" jsonschema:"why it did not run or did not end normally"`
	Note        string `json:"note,omitempty" jsonschema:"what was cut, and how the command ended when not by itself"`
}

// capture keeps the first max bytes written and counts them all.
type capture struct {
	max int
	buf []byte
	n   int64
}

func (c *capture) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// text is what was kept, as valid UTF-8 (a cut inside a character, or
// bytes that are not text, are replaced).
func (c *capture) text() string { return strings.ToValidUTF8(string(c.buf), "\uFFFD") }

func (c *capture) cut() bool { return c.n > int64(len(c.buf)) }

func (s *server) timeout(sec int) (time.Duration, error) {
	if sec < 0 {
		return 0, fmt.Errorf("timeout_s %d: want seconds, 0 for the default", sec)
	}
	if sec == 0 {
		return s.cfg.ExecTimeout, nil
	}
	d := time.Duration(sec) * time.Second
	if d > s.cfg.MaxExecTimeout {
		return 0, fmt.Errorf("timeout_s %d: this server allows at most %d", sec, int(s.cfg.MaxExecTimeout/time.Second))
	}
	return d, nil
}

func (s *server) exec(ctx context.Context, _ *mcp.CallToolRequest, in ExecArgs) (*mcp.CallToolResult, ExecResult, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, ExecResult{}, fmt.Errorf("command is empty: give a shell command line")
	}
	limit, err := s.timeout(in.TimeoutS)
	if err != nil {
		return nil, ExecResult{}, err
	}
	c, err := s.client(in.Name)
	if err != nil {
		return nil, ExecResult{}, err
	}
	defer c.Close()
	sess, err := c.Exec(ctx, api.ExecRequest{Argv: []string{"sh", "-c", in.Command}, Workdir: in.Workdir, TimeoutMS: limit.Milliseconds()})
	if err != nil {
		return nil, ExecResult{}, err
	}
	defer sess.Close()
	// A call the client gives up on hangs up on the command.
	stopWatch := context.AfterFunc(ctx, func() { sess.Close() })
	defer stopWatch()
	if in.Stdin != "" {
		go func() {
			_, _ = io.WriteString(sess, in.Stdin)
			_ = sess.CloseStdin()
		}()
	} else {
		_ = sess.CloseStdin()
	}
	out, errs := &capture{max: s.cfg.MaxOutput}, &capture{max: s.cfg.MaxOutput}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(out, sess.Stdout()) }()
	go func() { defer wg.Done(); _, _ = io.Copy(errs, sess.Stderr()) }()
	wg.Wait()
	x := sess.Exit()
	if ctx.Err() != nil {
		return nil, ExecResult{}, ctx.Err()
	}
	r := ExecResult{
		ExitCode: x.Code, Stdout: out.text(), Stderr: errs.text(), StdoutBytes: out.n, StderrBytes: errs.n,
		Truncated: out.cut() || errs.cut(), StdoutKept: len(out.buf), StderrKept: len(errs.buf),
		TimedOut: x.TimedOut, Signal: x.Signal, Error: x.Error,
	}
	r.Note = execNote(r, limit)
	return &mcp.CallToolResult{Content: text(execText(r))}, r, nil
}

// execNote says what was cut and how the command ended when not by
// itself: hosts show a model the text or the structured result, and both
// carry it.
func execNote(r ExecResult, limit time.Duration) string {
	var notes []string
	if r.StdoutBytes > int64(r.StdoutKept) {
		notes = append(notes, fmt.Sprintf("stdout cut: the first %d of %d bytes shown", r.StdoutKept, r.StdoutBytes))
	}
	if r.StderrBytes > int64(r.StderrKept) {
		notes = append(notes, fmt.Sprintf("stderr cut: the first %d of %d bytes shown", r.StderrKept, r.StderrBytes))
	}
	switch {
	case r.TimedOut:
		notes = append(notes, fmt.Sprintf("timed out after %s", limit))
	case r.Error != "":
		notes = append(notes, r.Error)
	}
	return strings.Join(notes, "; ")
}

// execText is the result as the model reads it: the output as written,
// then the note and the exit code.
func execText(r ExecResult) string {
	var b strings.Builder
	b.WriteString(r.Stdout)
	if r.Stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n")
		b.WriteString(r.Stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "[exit code %d; capsem: %s]", r.ExitCode, r.Note)
	} else {
		fmt.Fprintf(&b, "[exit code %d]", r.ExitCode)
	}
	return b.String()
}
