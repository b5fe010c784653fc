package ui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The pages in a real browser: Debian's chromium, headless,
// driven over the DevTools protocol. Each page must load with no console
// error or exception, show the session's values, and its filters, search
// and scrolling must change what is shown. Screenshots of each page go to
// a directory the test names in its log, kept for a person to look at.

// browser is a headless chromium tab and what its console said.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string

	mu      sync.Mutex
	console []string // errors and exceptions
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("needs chromium on PATH (apt-get install chromium; `go tool task deps` does)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, // the tests run as root
		chromedp.Flag("disable-gpu", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	shots := os.Getenv("CAPSEM_UI_SCREENSHOTS")
	if shots == "" {
		shots, err = os.MkdirTemp("", "capsem-ui-screenshots-")
		if err != nil {
			t.Fatal(err)
		}
	}
	b := &browser{t: t, ctx: ctx, shots: shots}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting chromium: %v", err)
	}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.console = append(b.console, m.String()+" at "+m.URL)
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// do runs actions with a time limit, failing the test on an error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls expr until it is true. An evaluation that fails is tried
// again: the page may be navigating ("Inspected target navigated or
// closed").
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting for %s (%s): last %v, %v", what, expr, ok, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}

// noConsoleErrors fails the test if the page logged an error.
func (b *browser) noConsoleErrors(page string) {
	b.t.Helper()
	time.Sleep(100 * time.Millisecond) // the last messages of the page
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.console {
		b.t.Errorf("%s: console: %s", page, m)
	}
	b.console = nil
}

func TestPagesInChromium(t *testing.T) {
	st, id := testStore(t, 450)
	srv := testServer(t, st)
	b := newBrowser(t)
	base := srv.URL + "/" + testToken + "/"

	// The sessions page: its values, and the filter as one types.
	b.do("the sessions page", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("#sessions")))
	if got := eval[string](b, `document.querySelector("#sessions tr.session td.cost").textContent`); got != "$0.0223" {
		t.Errorf("the session's cost shows %q, want $0.0223", got)
	}
	if got := eval[string](b, `document.querySelector("#sessions tr.session td.denied").textContent`); got != "2" {
		t.Errorf("the session's denied count shows %q, want 2", got)
	}
	b.screenshot("sessions")
	b.do("typing a filter", chromedp.SendKeys(chromedp.CSS("#session-filter"), "no-such-session"))
	b.waitFor("the list to hide the session", `document.querySelector("#session-count").textContent === "0 of 1 sessions"`)
	b.noConsoleErrors("sessions")

	// A session: the first page, the host summary, a denied request's
	// reason, and scrolling on to the end.
	b.do("the session page", chromedp.Navigate(base+"s/"+id), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	b.waitFor("the host summary", `document.querySelector("#hosts .hosts-table") !== null`)
	if got := eval[string](b, `document.querySelector("tr.denied-row.k-http .reason").textContent`); got != "http-denied" {
		t.Errorf("the denied request's reason shows %q", got)
	}
	if got := eval[int](b, `document.querySelectorAll("#rows tr.ev").length`); got != pageRows {
		t.Errorf("the first screen has %d rows, want %d", got, pageRows)
	}
	b.screenshot("session")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) &&
		!eval[bool](b, `document.querySelector("#more").textContent === "end of the session"`); {
		b.do("scrolling", chromedp.ScrollIntoView(chromedp.CSS("#more")))
		time.Sleep(100 * time.Millisecond)
	}
	if got := eval[int](b, `document.querySelectorAll("#rows tr.ev").length`); got != 460 {
		t.Errorf("scrolled to the end: %d rows, want 460", got)
	}
	b.noConsoleErrors("session")

	// The filters: a kind ticked reloads the page with only that kind; a
	// search finds rows by their text.
	b.do("ticking the http kind", chromedp.Click(chromedp.CSS(`input[name=kind][value=http]`)))
	b.waitFor("the filtered page", `location.search === "?kind=http" && document.querySelectorAll("#rows tr.ev").length === 1`)
	b.do("searching", chromedp.Navigate(base+"s/"+id), chromedp.WaitVisible(chromedp.CSS("#q")),
		chromedp.SendKeys(chromedp.CSS("#q"), "bulk/44\n"))
	b.waitFor("the search's rows", `location.search.includes("q=bulk") && document.querySelectorAll("#rows tr.ev").length === 11`)
	b.screenshot("session-search")
	b.noConsoleErrors("session filters")

	// A model call: its tool call's arguments and the answer.
	b.do("the model call page", chromedp.Navigate(base+"s/"+id+"/m/5"), chromedp.WaitVisible(chromedp.CSS(".tool")))
	if got := eval[string](b, `document.querySelector(".tool pre.args").textContent`); got != `{"command":"ls <dir>"}` {
		t.Errorf("the tool call's arguments show %q", got)
	}
	if got := eval[string](b, `document.querySelector(".tool pre.result").textContent`); got != "notes.md\nsrc" {
		t.Errorf("the tool's answer shows %q", got)
	}
	if got := eval[string](b, `document.querySelector("#m-tokens").textContent`); got != "42 / 17" {
		t.Errorf("the tokens show %q", got)
	}
	b.screenshot("model-call")
	b.noConsoleErrors("model call")
}
