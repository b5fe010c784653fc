package testserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CrashStatus is the exit status of the process after the crash tool.
const CrashStatus = 3

// HelloURI is the URI of the test resource.
const HelloURI = "capsem://testserver/hello"

// maxSlow caps the slow tool, so that a wrong argument cannot hang a test for
// longer than a test timeout would notice.
const maxSlow = 60 * time.Second

type echoArgs struct {
	Text string `json:"text"`
}

type addArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type envArgs struct {
	Name string `json:"name"`
}

type slowArgs struct {
	MS int `json:"ms"`
}

type noArgs struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// New returns the test server, not yet connected: the one a test server
// process serves, whose env tool reads the process's environment and whose
// crash tool ends the process. Only a process of its own may serve it (see
// NewInProcess for one served inside another program).
func New() *mcp.Server {
	return newServer(os.Getenv, true)
}

// newServer builds the test server; getenv answers the env tool, and
// withCrash adds the crash tool.
func newServer(getenv func(string) string, withCrash bool) *mcp.Server {
	var calls atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "capsem-testserver", Version: "1"}, &mcp.ServerOptions{
		Instructions: "capsem's test MCP server",
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var vals []string
			for _, v := range []string{"alice", "bob"} {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					vals = append(vals, v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: vals, Total: len(vals)}}, nil
		},
	})
	count := func() int64 { return calls.Add(1) - 1 }
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "returns text"}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		count()
		return text(a.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "returns a+b"}, func(_ context.Context, _ *mcp.CallToolRequest, a addArgs) (*mcp.CallToolResult, any, error) {
		count()
		return text(strconv.FormatFloat(a.A+a.B, 'g', -1, 64)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "returns an environment variable of the server"}, func(_ context.Context, _ *mcp.CallToolRequest, a envArgs) (*mcp.CallToolResult, any, error) {
		count()
		return text(getenv(a.Name)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "calls", Description: "returns how many tools/call this process served before"}, func(_ context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		return text(strconv.FormatInt(count(), 10)), nil, nil
	})
	if withCrash {
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "ends the server process with status 3"}, func(_ context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "testserver: crash tool called, exiting with status", CrashStatus)
			os.Exit(CrashStatus)
			return nil, nil, nil
		})
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "sleeps ms milliseconds"}, func(ctx context.Context, _ *mcp.CallToolRequest, a slowArgs) (*mcp.CallToolResult, any, error) {
		count()
		d := min(time.Duration(a.MS)*time.Millisecond, maxSlow)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return text(fmt.Sprintf("slept %dms", a.MS)), nil, nil
	})
	s.AddResource(&mcp.Resource{URI: HelloURI, Name: "hello", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "hello from testserver"}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["name"]}}}}, nil
	})
	return s
}

// Run serves the test server over newline-delimited JSON-RPC on in and out
// (a process's stdin and stdout) until in ends or ctx is done.
func Run(ctx context.Context, in io.Reader, out io.Writer) error {
	rc, ok := in.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(in)
	}
	wc, ok := out.(io.WriteCloser)
	if !ok {
		wc = nopWriteCloser{out}
	}
	err := New().Run(ctx, &mcp.IOTransport{Reader: rc, Writer: wc})
	if err != nil && (ctx.Err() != nil || isEOF(err)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("testserver: %w", err)
	}
	return nil
}

func isEOF(err error) bool {
	return err == io.EOF || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "closed")
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
