package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/ports"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/sandbox/sessionstore"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/otlp"
)

// Options are what a supervisor is run with.
type Options struct {
	Store store.Options // the session store's limits (zero: the store's defaults)
	Audit otlp.Config   // the session's audit stream (URL "": none)
	Log   *slog.Logger  // its log (nil: none)
	CADir string        // the interception CA's directory ("": ca.DefaultDir())
	Host  string        // how capsem names itself to the guest's agent (sandbox.Config.Host)
	// Cold boots the guest even when a suspended one is saved (which is
	// then discarded).
	Cold bool
}

// supervisor is a running sandbox: the api.Backend its API serves.
type supervisor struct {
	dir       home.Dir
	settings  home.Settings
	sb        *sandbox.Sandbox
	rs        *sessionstore.Store
	log       *slog.Logger
	started   time.Time
	host      string      // Options.Host: the capsem a snapshot records
	suspended atomic.Bool // the guest was saved by Suspend: it is discarded, not shut down
	saveMu    sync.Mutex  // one TakeSnapshot or Suspend at a time, from its tag's check to its commit

	stopOnce sync.Once
	stopping chan struct{} // closed when a stop is asked for

	mu     sync.Mutex // guards launch (rewritten on a policy reload and a change of the ports)
	launch home.Launch

	pub     *ports.Publisher // the published ports (ports.go)
	portsMu sync.Mutex       // one change of the ports at a time, settings included
}

// Run runs sandbox name of the data directory data until it is stopped
// (POST /v1/stop, SIGTERM or SIGINT) or its guest dies; either way it
// records the session's end, moves it into the main store and gives the
// lock back. SIGHUP reloads the policy. It calls report once: when the
// guest answers and the API listens, or with why not.
func Run(ctx context.Context, data, name string, o Options, report func(Ready)) (err error) {
	reported := false
	defer func() {
		if !reported {
			m := Ready{Error: "the supervisor failed"}
			if err != nil {
				m.Error = err.Error()
			}
			var ar home.AlreadyRunningError
			var re RestoreError
			m.Running, m.Restoring = errors.As(err, &ar), errors.As(err, &re)
			report(m)
		}
	}()
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
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
	_ = os.RemoveAll(d.StoreCopiesDir()) // readers that died left theirs
	log := o.Log.With("sandbox", name)

	restore, err := pendingRestore(d, settings, o)
	if err != nil {
		return err
	}
	var keep map[string]string
	if restore != nil {
		keep = restore.meta.Placeholders
	}
	pol, err := sandbox.LoadBoundPolicy(settings.Policy, settings.Secrets, keep)
	if err != nil {
		return err
	}
	if err := checkPlaceholders(pol, keep); err != nil {
		return err
	}
	authority, err := sandbox.LoadAuthority(o.CADir)
	if err != nil {
		return err
	}
	storeOpts := o.Store
	if storeOpts.SealKey, err = ca.LoadOrCreateSealKey(o.CADir); err != nil {
		return err
	}
	// The published ports are taken before anything boots: one another
	// program or sandbox holds fails the start at once.
	pub := ports.New(log)
	defer pub.Close()
	if err := publishSettings(pub, settings); err != nil {
		return err
	}
	host, _ := os.Hostname()
	rs, err := sessionstore.Open(data, store.Session{Command: []string{"capsem", "start", name}, PolicySHA256: pol.SHA256, Image: settings.Image, Host: host, Sandbox: name}, storeOpts)
	if err != nil {
		return err
	}
	rs.Warn = func(msg string) { log.Warn(msg) }
	if err := rs.StartAudit(o.Audit); err != nil {
		_ = rs.End(nil)
		return err
	}
	sup := &supervisor{dir: d, settings: settings, rs: rs, log: log, host: o.Host, stopping: make(chan struct{}), pub: pub}

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
	if err := sandbox.MakeTransferDisk(xferPath); err != nil {
		_ = rs.End(nil)
		return err
	}
	ramFile, err := sandbox.RAMFilePath(name, settings.MemoryMiB)
	if err != nil {
		if restore != nil {
			_ = rs.End(nil)
			return fmt.Errorf("the saved guest cannot be resumed: %w", err)
		}
		log.Warn("the sandbox runs, but cannot be snapshotted", "why", err)
	}
	sb, err := sandbox.Start(bootCtx, sandbox.Config{
		Guest:        d.Guest(settings),
		Policy:       pol,
		Workspace:    settings.Workspace,
		DataDisk:     d.Disk(),
		TransferDisk: xferPath,
		CPUs:         settings.CPUs,
		MemoryMiB:    settings.MemoryMiB,
		Recorder:     rs.W,
		Authority:    authority,
		ConsoleLog:   d.ConsoleLog(),
		BootTimeout:  hypervisor.DefaultBootTimeout,
		Logger:       log,
		Host:         o.Host,
		RAMFile:      ramFile,
		Restore:      restore.config(),
		Overlay:      d.Overlay(),
	})
	if err != nil {
		_ = rs.End(nil)
		_, _ = sessionstore.Merge(data, 5*time.Second)
		if restore != nil {
			return RestoreError{err}
		}
		return err
	}
	sup.sb, sup.started = sb, time.Now()
	if restore != nil {
		// Resumed: the saved guest is running again and is not resumed twice.
		_ = os.RemoveAll(d.SuspendDir())
	}

	sock := d.SocketPath()
	ln, err := home.ListenUnix(sock)
	if err != nil {
		sb.Shutdown("capsem could not serve the sandbox's API")
		_ = rs.End(nil)
		return err
	}
	srv := &http.Server{Handler: api.Handler(sup), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	sup.pub.Attach(sb)
	sup.launch = home.Launch{PID: os.Getpid(), Started: sup.started, SessionID: rs.ID(), PolicySHA256: pol.SHA256, Socket: sock, Ports: portsInForce(sup.pub)}
	if err := sup.writeLaunch(); err != nil {
		log.Warn("run.json not written: capsem ls shows less", "err", err)
	}
	if restore != nil {
		log.Info("sandbox running, its saved guest resumed", "session", rs.ID(), "socket", sock, "saved", restore.meta.Created.Format(time.RFC3339))
	} else {
		log.Info("sandbox running", "session", rs.ID(), "socket", sock, "boot", time.Duration(sb.Ready().Uptime).Round(time.Millisecond))
	}
	reported = true
	report(Ready{OK: true})

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
	if sup.suspended.Load() {
		sb.Discard()
	} else {
		sb.Shutdown("capsem stop " + name)
	}
	code := 0
	if crashed {
		code = -1
	}
	endErr := rs.End(&code)
	if _, err := sessionstore.Merge(data, 5*time.Second); err != nil {
		log.Warn("the session stays in its own store until the next capsem command", "err", err)
	}
	_ = os.Remove(sock)
	_ = os.Remove(d.LaunchPath())
	log.Info("sandbox stopped", "session", rs.ID())
	if crashed {
		return errors.New("the guest stopped on its own")
	}
	return endErr
}
