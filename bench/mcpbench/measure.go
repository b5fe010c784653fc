package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/capsem/capsem/bench/internal/cpu"
	"github.com/capsem/capsem/bench/internal/listflag"
)

// pathNames are the paths -paths accepts, with their report headings.
var pathNames = map[string]string{
	"direct":  "direct (host → stdio server)",
	"gateway": "gateway (guest → capsem-net → MITM → gateway → stdio server)",
	"mitm":    "MITM only (guest → capsem-net → MITM → remote HTTP server)",
	"http":    "remote HTTP server from the host (no capsem)",
}

// pathOrder is the order of the report's rows.
var pathOrder = []string{"direct", "gateway", "http", "mitm"}

// rep measures every path once, with a fresh capsem-net and namespace, in
// the order of -paths: the paths alternate, so that drift over the run
// hits all of them alike.
func (b *bench) rep(rep int) error {
	var err error
	if b.env, err = b.startEnv(rep); err != nil {
		return err
	}
	defer func() { b.env.Stop(); b.env = nil }()
	for _, where := range listflag.Split(*flagPaths) {
		waitQuiet()
		s, err := b.measure(where)
		if err != nil {
			return err
		}
		b.samples[where] = append(b.samples[where], s)
		fmt.Fprintf(os.Stderr, "rep %d  %-8s p50 %6.0f µs  p90 %6.0f  p99 %6.0f  mean %6.0f  max %7.0f  capsem-net CPU %4.0f µs/call\n",
			rep, where, s.P50us, s.P90us, s.P99us, s.MeanUs, s.MaxUs, s.capsemUs)
	}
	return nil
}

// measure runs the client sub-mode over one path.
func (b *bench) measure(where string) (sample, error) {
	args := []string{"client", "-proto", *flagProto, "-n", strconv.Itoa(*flagN), "-warmup", strconv.Itoa(*flagWarmup)}
	inGuest := false
	switch where {
	case "direct":
		args = append(args, "-server", b.capsem)
	case "gateway":
		args = append(args, "-url", "https://mcp.capsem.internal/bench", "-ca", b.capsemCA)
		inGuest = true
	case "mitm":
		args = append(args, "-url", "https://"+upstreamName+"/mcp", "-ca", b.capsemCA)
		inGuest = true
	case "http":
		args = append(args, "-url", fmt.Sprintf("https://127.0.0.1:%d/mcp", b.upstream.Port), "-ca", b.upstreamCA)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	if inGuest {
		cmd = b.env.NS.Command(ctx, b.exe, args...)
	} else {
		cmd = exec.CommandContext(ctx, b.exe, args...)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	pid := b.env.PID()
	c0 := cpu.ProcSeconds(pid)
	err := cmd.Run()
	c1 := cpu.ProcSeconds(pid)
	if err != nil {
		return sample{}, fmt.Errorf("client %s: %v: %s\ncapsem-net: %s", strings.Join(args, " "), err, errOut.String(), b.env.Out.String())
	}
	var s sample
	if err := json.Unmarshal(out.Bytes(), &s.callResult); err != nil {
		return sample{}, fmt.Errorf("client output %q: %v", out.String(), err)
	}
	if inGuest {
		// Warm-up and session set-up are in it too: a slight overestimate.
		s.capsemUs = (c1 - c0) * 1e6 / float64(*flagN+*flagWarmup)
	}
	return s, nil
}
