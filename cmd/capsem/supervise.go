package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/loglevel"
	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/store"
)

// The supervisor of a running sandbox is the capsem binary in another mode
// (`capsem supervise`, started by `capsem start` detached in a session of
// its own, or run in place by `capsem start --foreground`). It holds the
// sandbox's lock, its guest (QEMU, which dies with it), the netstack, the
// MITM and the session's event writer, and serves the API on the unix
// socket until it is stopped (POST /v1/stop, SIGTERM or SIGINT) or its
// guest dies; either way it records the session's end and gives its lock
// back.

// readyFDEnv names the environment variable that tells a detached
// supervisor which inherited descriptor to report readiness on.
const readyFDEnv = "CAPSEM_READY_FD"

// readyMsg is what a supervisor reports once: ready, or why not.
type readyMsg struct {
	OK      bool   `json:"ok,omitempty"`
	Error   string `json:"error,omitempty"`
	Running bool   `json:"running,omitempty"` // the error is that it already runs
}

func superviseCommand() *cli.Command {
	return &cli.Command{
		Name:      "supervise",
		Usage:     "run a sandbox's supervisor (capsem start runs this; use capsem start --foreground)",
		UsageText: "capsem supervise [--data DIR] NAME",
		Hidden:    true,
		Flags:     append([]cli.Flag{dataFlag(), logLevelFlag(), caDirFlag()}, storeFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError{errors.New("want one sandbox NAME")}
			}
			opts, err := superviseOptionsFrom(c)
			if err != nil {
				return err
			}
			report := func(m readyMsg) {}
			if fd := os.Getenv(readyFDEnv); fd != "" {
				var n int
				if _, err := fmt.Sscan(fd, &n); err == nil {
					f := os.NewFile(uintptr(n), "ready")
					report = func(m readyMsg) {
						_ = json.NewEncoder(f).Encode(m)
						f.Close()
					}
				}
				os.Unsetenv(readyFDEnv)
			}
			return supervise(c.Context, c.String("data"), c.Args().First(), opts, report)
		},
	}
}

func logLevelFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-level", Value: "info", Usage: "the supervisor's log: debug, info, warn, error"}
}

// superviseOptions are what a supervisor takes from its flags.
type superviseOptions struct {
	store store.Options
	log   *slog.Logger
	caDir string // "": ca.DefaultDir()
}

func superviseOptionsFrom(c *cli.Context) (superviseOptions, error) {
	o := superviseOptions{caDir: c.String("ca-dir")}
	var err error
	if o.store, err = storeOptions(c); err != nil {
		return o, err
	}
	if o.log, err = loglevel.Logger(c.App.ErrWriter, c.String("log-level")); err != nil {
		return o, usageError{err}
	}
	return o, nil
}

// supervisor is a running sandbox: the api.Backend its API serves.
type supervisor struct {
	dir      home.Dir
	settings home.Settings
	sb       *sandbox.Sandbox
	rs       *runStore
	log      *slog.Logger
	started  time.Time

	stopOnce sync.Once
	stopping chan struct{} // closed when a stop is asked for

	mu  sync.Mutex // guards run (rewritten on a policy reload)
	run home.Launch
}

// supervise runs sandbox name until it is stopped or its guest dies. It
// calls report once: when the guest answers, or with why it does not.
func supervise(ctx context.Context, data, name string, o superviseOptions, report func(readyMsg)) (err error) {
	reported := false
	defer func() {
		if !reported {
			m := readyMsg{Error: "the supervisor failed"}
			if err != nil {
				m.Error = err.Error()
			}
			var ar home.AlreadyRunningError
			m.Running = errors.As(err, &ar)
			report(m)
		}
	}()
	d := home.New(data, name)
	settings, err := d.ReadSettings()
	if err != nil {
		return err
	}
	lock, err := d.Lock()
	if err != nil {
		return err
	}
	defer lock.Close()
	// A socket directory that is not ours fails the start before the guest boots.
	if err := home.MakeSocketDir(d.SocketPath()); err != nil {
		return err
	}
	_ = os.Remove(d.CrashPath())
	_ = os.Remove(d.LaunchPath())
	_ = os.RemoveAll(d.SnapshotsDir()) // readers that died left theirs
	log := o.log.With("sandbox", name)

	pol, err := sandbox.LoadBoundPolicy(settings.Policy, settings.Secrets, nil)
	if err != nil {
		return err
	}
	authority, err := loadAuthority(o.caDir)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	rs, err := openRunStoreWith(data, store.Session{Command: []string{"capsem", "start", name}, PolicySHA256: pol.SHA256, Image: settings.Image, Host: host, Sandbox: name}, o.store)
	if err != nil {
		return err
	}
	sup := &supervisor{dir: d, settings: settings, rs: rs, log: log, stopping: make(chan struct{})}

	// SIGTERM and SIGINT stop the sandbox, also while it boots; SIGHUP
	// reloads the policy (a hangup of the terminal that started a
	// detached supervisor never reaches it: it has its own session).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	bootCtx, cancelBoot := context.WithCancel(ctx)
	defer cancelBoot()
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGHUP {
				if _, err := sup.ReloadPolicy(); err != nil {
					log.Error("SIGHUP: policy reload failed; the policy in force is kept", "err", err)
				}
				continue
			}
			log.Info("stopping on " + sig.String())
			cancelBoot()
			sup.Stop()
		}
	}()

	// The transfer disk: made anew at each start, its contents nothing.
	xferPath := d.TransferDisk()
	if err := makeTransferDisk(xferPath); err != nil {
		_ = rs.end(nil)
		return err
	}
	sb, err := sandbox.Start(bootCtx, sandbox.Config{
		Guest:        d.Guest(settings),
		Policy:       pol,
		Workspace:    settings.Workspace,
		DataDisk:     d.Disk(),
		TransferDisk: xferPath,
		CPUs:         settings.CPUs,
		MemoryMiB:    settings.MemoryMiB,
		Recorder:     rs.w,
		Authority:    authority,
		ConsoleLog:   d.ConsoleLog(),
		BootTimeout:  hypervisor.DefaultBootTimeout,
		Logger:       log,
		Host:         hostName(),
	})
	if err != nil {
		_ = rs.end(nil)
		_, _ = mergeRuns(data, 5*time.Second)
		return err
	}
	sup.sb, sup.started = sb, time.Now()

	sock := d.SocketPath()
	ln, err := home.ListenUnix(sock)
	if err != nil {
		sb.Shutdown("capsem could not serve the sandbox's API")
		_ = rs.end(nil)
		return err
	}
	srv := &http.Server{Handler: api.Handler(sup), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	sup.run = home.Launch{PID: os.Getpid(), Started: sup.started, SessionID: rs.w.ID(), PolicySHA256: pol.SHA256, Socket: sock}
	if err := sup.writeRun(); err != nil {
		log.Warn("run.json not written: capsem ls shows less", "err", err)
	}
	log.Info("sandbox running", "session", rs.w.ID(), "socket", sock, "boot", time.Duration(sb.Ready().Uptime).Round(time.Millisecond))
	reported = true
	report(readyMsg{OK: true})

	crashed := false
	select {
	case <-sup.stopping:
	case <-sb.Done():
		crashed = true
		sup.Stop()
	}
	// New requests are refused; the ones under way get a moment to answer
	// (the stop's own 202, an event stream's last lines); execs still
	// running end with the guest.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(sctx)
	cancel()
	_ = srv.Close()
	if crashed {
		why := "the guest stopped on its own (see its console log: " + d.ConsoleLog() + ")"
		if err := sb.Err(); errors.Is(err, proto.ErrViolation) {
			why = "the guest was stopped: " + err.Error()
		}
		log.Error(why)
		_ = os.WriteFile(d.CrashPath(), []byte(why), 0o600)
	}
	sb.Shutdown("capsem stop " + name)
	code := 0
	if crashed {
		code = -1
	}
	endErr := rs.end(&code)
	if _, err := mergeRuns(data, 5*time.Second); err != nil {
		log.Warn("the session stays in its own store until the next capsem command", "err", err)
	}
	_ = os.Remove(sock)
	_ = os.Remove(d.LaunchPath())
	log.Info("sandbox stopped", "session", rs.w.ID())
	if crashed {
		return errors.New("the guest stopped on its own")
	}
	return endErr
}

func (s *supervisor) writeRun() error {
	s.mu.Lock()
	b, _ := json.Marshal(s.run)
	s.mu.Unlock()
	return home.WriteFileAtomic(s.dir.LaunchPath(), b, 0o600)
}

func (s *supervisor) Status() api.Status {
	st, err := s.dir.Status(policyFileSHA)
	if err != nil {
		st = api.Status{Name: s.dir.Name}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.State, st.PID, st.Started, st.SessionID, st.PolicySHA256 = api.StateRunning, s.run.PID, s.run.Started, s.run.SessionID, s.sb.Policy().SHA256
	return st
}

// Exec runs a command with the sandbox's environment under the request's
// (which wins, key by key).
func (s *supervisor) Exec(ctx context.Context, ex proto.Exec) (*proto.Session, error) {
	select {
	case <-s.stopping:
		return nil, errors.New("the sandbox is stopping")
	default:
	}
	senv, _ := sandbox.SecretEnv(s.sb.Policy(), nil)
	ex.Env = mergeEnv(append(senv, s.settings.Env...), ex.Env)
	return s.sb.Exec(ctx, ex)
}

// mergeEnv is base with over's variables added, over's value winning
// where both set a key.
func mergeEnv(base, over []string) []string {
	if len(base) == 0 {
		return over
	}
	set := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	var out []string
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

func (s *supervisor) ReloadPolicy() (api.Reload, error) {
	// The guest holds its placeholders: they are kept.
	p, err := sandbox.LoadBoundPolicy(s.settings.Policy, s.settings.Secrets, s.sb.Policy().Placeholders())
	if err != nil {
		return api.Reload{}, err
	}
	s.sb.SetPolicy(p)
	s.mu.Lock()
	s.run.PolicySHA256 = p.SHA256
	s.mu.Unlock()
	_ = s.writeRun()
	s.log.Info("policy reloaded", "sha256", p.SHA256)
	return api.Reload{Policy: sandbox.PolicyName(s.settings.Policy), SHA256: p.SHA256}, nil
}

func (s *supervisor) Stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

func (s *supervisor) Events(after uint64, fn func(store.Event) error) error {
	// Events appended but still in the writer's group-commit batch are not
	// readable yet: a client that ran a command and then asked for the
	// events missed its exec event (TestPythonSDK, once in a clean-clone
	// run). Sync makes everything appended so far readable first.
	if err := s.rs.w.Sync(); err != nil {
		s.log.Warn("events: the store could not sync; the newest events may be missing", "err", err)
	}
	return s.rs.st.EventsAfter(s.rs.w.ID(), after, fn)
}

func (s *supervisor) Done() <-chan struct{} { return s.stopping }

// Snapshot checkpoints the session's store into the sandbox's snapshots
// directory, which the reader removes (and the next start clears).
func (s *supervisor) Snapshot() (api.Snapshot, error) {
	return s.rs.snapshot(s.dir.SnapshotsDir())
}

func (s *supervisor) PutFile(ctx context.Context, path, mode string, size int64, body io.Reader) (int64, error) {
	n, err := s.sb.PutFile(ctx, path, mode, size, body)
	if err != nil {
		s.log.Warn("file put failed", "path", path, "bytes", n, "err", err)
	}
	return n, err
}

func (s *supervisor) GetFile(ctx context.Context, path string, open func(int64) (io.Writer, error)) (int64, error) {
	n, err := s.sb.GetFile(ctx, path, open)
	if err != nil {
		// Once the answer has begun the client sees only a short body:
		// the why is here.
		s.log.Warn("file get failed", "path", path, "bytes", n, "err", err)
	}
	return n, err
}

// makeTransferDisk makes path a sparse file of sandbox.TransferDiskSize.
func makeTransferDisk(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("transfer disk: %w", err)
	}
	err = f.Truncate(sandbox.TransferDiskSize)
	return errors.Join(err, f.Close())
}
