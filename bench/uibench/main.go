package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capsem/capsem/bench/internal/stats"
)

var (
	flagEvents   = flag.Int("events", 1_000_000, "events in the big session")
	flagSessions = flag.Int("sessions", 100, "small sessions besides it (300 events each)")
	flagN        = flag.Int("n", 20, "timed GETs per page and mode")
	flagStore    = flag.String("store", "", "use (or fill, when empty) the store in `DIR` instead of a temporary one")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "uibench:", err)
		os.Exit(1)
	}
}

func run() error {
	tmp, err := os.MkdirTemp("", "capsem-uibench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dir := *flagStore
	if dir == "" {
		dir = filepath.Join(tmp, "store")
	}
	start := time.Now()
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		if _, err := fill(dir, *flagEvents, *flagSessions); err != nil {
			return fmt.Errorf("filling the store: %w", err)
		}
		fmt.Printf("store: %d events in the big session, %d small sessions, written in %v\n", *flagEvents, *flagSessions, time.Since(start).Round(time.Millisecond))
	}
	bin := filepath.Join(tmp, "capsem")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/capsem").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/capsem (run from the repository root): %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "ui", "--data", dir, "--listen", "127.0.0.1:0")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("capsem ui printed no URL: %v", err)
	}
	base := strings.TrimSpace(strings.TrimPrefix(line, "capsem ui: "))
	go io.Copy(io.Discard, stdout)

	list, err := fetch(base)
	if err != nil {
		return err
	}
	// The newest session is the big one: the first link of the list.
	i := strings.Index(list, `/s/`)
	if i < 0 {
		return fmt.Errorf("no session link in the list")
	}
	id := list[i+3 : i+3+strings.IndexByte(list[i+3:], '"')]
	sessionURL := base + "s/" + id

	fmt.Printf("\n| page | mode | min | median | max |\n|---|---|---|---|---|\n")
	for _, p := range []struct{ name, url string }{
		{fmt.Sprintf("sessions (%d)", *flagSessions+1), base},
		{fmt.Sprintf("first screen of the %d-event session", *flagEvents), sessionURL},
		{"its next 200 rows (scrolling)", sessionURL + "/rows?after=200"},
		{"its denied events (a filter)", sessionURL + "?decision=denied"},
	} {
		for _, cold := range []bool{true, false} {
			d, err := timeGets(p.url, *flagN, cold)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			mode := "warm"
			if cold {
				mode = "cold (store opened)"
			}
			fmt.Printf("| %s | %s | %s | %s | %s |\n", p.name, mode, ms(slices.Min(d)), ms(stats.Median(d)), ms(slices.Max(d)))
		}
	}
	t0 := time.Now()
	if _, err := fetch(sessionURL + "/hosts"); err != nil {
		return err
	}
	first := time.Since(t0)
	t0 = time.Now()
	if _, err := fetch(sessionURL + "/hosts"); err != nil {
		return err
	}
	fmt.Printf("\nhost summary of the big session: %s the first time (reads it whole), %s cached\n", ms(first), ms(time.Since(t0)))
	return nil
}

// timeGets times n GETs of url, each on a new connection; cold waits for
// capsem ui to close the store before each.
func timeGets(url string, n int, cold bool) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < n; i++ {
		if cold {
			time.Sleep(1500 * time.Millisecond) // capsem ui closes the store after 1 s idle
		}
		t0 := time.Now()
		if _, err := fetch(url); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

func fetch(url string) (string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, b)
	}
	return string(b), err
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
