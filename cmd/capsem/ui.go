package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/sandbox/storeview"
	"github.com/capsem/capsem/store/sqliteexport"
	"github.com/capsem/capsem/ui"
)

func uiCommand() *cli.Command {
	return &cli.Command{
		Name:      "ui",
		Usage:     "serve a web page of the sessions in the event store, and of what running sandboxes ask, on this machine only",
		UsageText: "capsem ui [--data DIR | --sqlite FILE] [--listen 127.0.0.1:PORT] [--open]",
		Description: "Prints the page's URL: it holds a random access token, the key to the sessions for as long as\n" +
			"capsem ui runs — share it with no one. The page lists the sessions; a session shows every event in\n" +
			"order with filters, a per-host summary, and its model calls with their tool calls. The questions\n" +
			"page answers what running sandboxes ask ([network] unknown = \"ask\"): while capsem ui runs, they\n" +
			"ask it rather than refuse. --sqlite shows a file capsem export wrote (one someone sent) instead of\n" +
			"the store. Ctrl-C stops it.",
		Flags: []cli.Flag{
			dataFlag(),
			&cli.StringFlag{Name: "sqlite", Usage: "show the sessions of `FILE`, a capsem export, instead of the store"},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:0", Usage: "`ADDR` to serve on: a loopback address and a port (0: any free port)"},
			&cli.BoolFlag{Name: "open", Usage: "open the page in the desktop's browser (through a page in a private temporary file: the token goes on no command line)"},
		},
		Action: runUI,
	}
}

// uiIdleClose is how long capsem ui keeps the main store open after its
// last read. A store has one opener at a time: while capsem ui holds it, a
// run that ends cannot move its session in (the next command does) and
// capsem sessions cannot read it. A second of grace serves a page's few
// requests (the page, its host summary, its next rows) from one open,
// without holding the store while no one reads.
const uiIdleClose = time.Second

// uiLiveRefresh is how old a running session's snapshot may be before
// capsem ui asks for a new one: the page follows a live session every two
// seconds, and a checkpoint (hard links and a sync) costs its run a few
// milliseconds.
const uiLiveRefresh = time.Second

func runUI(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", c.Args().First())}
	}
	addr := c.String("listen")
	if err := checkLoopback("--listen", addr, "capsem ui serves the loopback only", "the sessions are not for other machines"); err != nil {
		return err
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	if c.IsSet("data") && c.IsSet("sqlite") {
		return usageError{errors.New("--data or --sqlite, not both")}
	}
	var src ui.Source
	if file := c.String("sqlite"); file != "" {
		r, err := sqliteexport.OpenReader(file)
		if err != nil {
			return fmt.Errorf("--sqlite: %w", err)
		}
		defer r.Close()
		src = r
	} else {
		v, err := storeview.Open(c.String("data"), storeview.Options{IdleClose: uiIdleClose, Refresh: uiLiveRefresh})
		if err != nil {
			return err
		}
		defer v.Close()
		src = v
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := ui.New(src, token, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", addr, err)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !c.IsSet("sqlite") {
		// While capsem ui runs, the running sandboxes ask it what their
		// policies did not foresee.
		h.ServeAsks(followAsks(ctx, c.String("data")))
	}
	url := fmt.Sprintf("http://%s%s", ln.Addr(), h.Base())
	fmt.Fprintf(c.App.Writer, "capsem ui: %s\n(the token in this URL is the key to the sessions: share it with no one; Ctrl-C stops)\n", url)
	if c.Bool("open") {
		done, err := openBrowser(url)
		if err != nil {
			fmt.Fprintf(c.App.ErrWriter, "capsem ui: could not open a browser (%v): open the URL above yourself\n", err)
		}
		defer done()
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// openBrowser hands url to the desktop's opener without putting it on a
// command line: the token in it is the key to the sessions, and every
// process's argv is readable by every local user (ps, /proc/PID/cmdline) —
// the opener's, and the browser's it starts. The opener gets the file: URL
// of a page that sends the browser on to url, 0600 in a 0700 directory of
// its own; done removes it, as does a timer after openPageLinger. done is
// never nil.
func openBrowser(url string) (done func(), err error) {
	dir, err := os.MkdirTemp("", "capsem-ui-")
	if err != nil {
		return func() {}, err
	}
	var once sync.Once
	done = func() { once.Do(func() { os.RemoveAll(dir) }) }
	page := filepath.Join(dir, "open.html")
	u := html.EscapeString(url)
	body := `<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">` +
		`<meta http-equiv="refresh" content="0; url=` + u + `"><title>capsem ui</title><a href="` + u + `">capsem ui</a>` + "\n"
	if err := os.WriteFile(page, []byte(body), 0o600); err != nil {
		done()
		return func() {}, err
	}
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, (&neturl.URL{Scheme: "file", Path: page}).String())
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		done()
		return func() {}, err
	}
	go cmd.Wait()
	time.AfterFunc(openPageLinger, done)
	return done, nil
}

// openPageLinger is how long the page openBrowser hands over stays: a
// browser started cold takes seconds to read it, and once read it is no
// longer needed (the browser is at the URL).
const openPageLinger = time.Minute
