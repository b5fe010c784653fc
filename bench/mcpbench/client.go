package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capsem/capsem/bench/internal/stats"
)

// callResult is what the client sub-mode prints, as JSON: latencies of the
// measured calls in microseconds.
type callResult struct {
	Calls  int     `json:"calls"`
	P50us  float64 `json:"p50_us"`
	P90us  float64 `json:"p90_us"`
	P99us  float64 `json:"p99_us"`
	MeanUs float64 `json:"mean_us"`
	MaxUs  float64 `json:"max_us"`
}

// echoText is what every call sends and expects back: a short argument, as
// an agent's small tool calls are.
const echoText = "hello from mcpbench"

// clientMain is the "client" sub-mode: one MCP session, over streamable
// HTTP to -url (trusting -ca) or over stdio to `-server mcp-test-server`,
// -warmup calls of echo, then -n calls one after another; it prints a
// callResult. It runs in the guest namespace (gateway, mitm) or on the host
// (direct, http).
func clientMain(args []string) {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	url := fs.String("url", "", "streamable-HTTP endpoint of the MCP server")
	caFile := fs.String("ca", "", "PEM file of the CA to trust for -url")
	server := fs.String("server", "", "capsem binary to run as `capsem mcp-test-server` over stdio (instead of -url)")
	proto := fs.String("proto", "h2", "HTTP version for -url: h1 or h2")
	n := fs.Int("n", 2000, "measured calls")
	warmup := fs.Int("warmup", 50, "calls before the measured ones")
	fs.Parse(args)
	res, err := runCalls(*url, *caFile, *server, *proto == "h2", *n, *warmup)
	if err != nil {
		log.Fatal("mcpbench client: ", err)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

func runCalls(url, caFile, server string, h2 bool, n, warmup int) (callResult, error) {
	var t mcp.Transport
	switch {
	case server != "":
		t = &mcp.CommandTransport{Command: exec.Command(server, "mcp-test-server")}
	case url != "":
		pemBytes, err := os.ReadFile(caFile)
		if err != nil {
			return callResult{}, err
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pemBytes) {
			return callResult{}, fmt.Errorf("%s: no certificate", caFile)
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		t = &mcp.StreamableClientTransport{
			Endpoint:   url,
			HTTPClient: &http.Client{Transport: tr},
			// No retries: a failed call is a failed measurement.
			MaxRetries: -1,
		}
	default:
		return callResult{}, errors.New("want -url or -server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, t, nil)
	if err != nil {
		return callResult{}, fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": echoText}}
	call := func() error {
		r, err := cs.CallTool(ctx, params)
		if err != nil {
			return err
		}
		if r.IsError || len(r.Content) != 1 {
			return fmt.Errorf("echo answered %+v", r)
		}
		if tc, ok := r.Content[0].(*mcp.TextContent); !ok || tc.Text != echoText {
			return fmt.Errorf("echo answered %+v, want %q", r.Content[0], echoText)
		}
		return nil
	}
	for range warmup {
		if err := call(); err != nil {
			return callResult{}, fmt.Errorf("warm-up call: %w", err)
		}
	}
	lat := make([]float64, 0, n)
	var sum float64
	for i := range n {
		t0 := time.Now()
		if err := call(); err != nil {
			return callResult{}, fmt.Errorf("call %d: %w", i, err)
		}
		us := float64(time.Since(t0).Nanoseconds()) / 1e3
		lat = append(lat, us)
		sum += us
	}
	return callResult{
		Calls: n,
		P50us: stats.Percentile(lat, 50), P90us: stats.Percentile(lat, 90), P99us: stats.Percentile(lat, 99),
		MeanUs: sum / float64(n), MaxUs: stats.Percentile(lat, 100),
	}, nil
}
