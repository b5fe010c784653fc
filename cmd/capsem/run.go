package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/loglevel"
	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/hypervisor"
	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/ports"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/sandbox/sessionstore"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/otlp"
	"github.com/capsem/capsem/version"
)

// hostEnvAllowlist are the host variables a guest command gets (besides
// --env): what a terminal program needs to draw and to tell the time.
var hostEnvAllowlist = []string{"TERM", "LANG", "TZ"}

// exitTimeout is capsem run's exit status when --timeout killed the
// command (as timeout(1)).
const exitTimeout = 124

// exitStatus is an error that only carries the exit status of the command
// capsem ran: main exits with it and prints nothing.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run a command in a fresh guest whose only network is capsem's filter",
		UsageText: "capsem run [--dry-run [--json]] [--policy FILE] [--workspace DIR] [--env K=V]… [--secret NAME[@HOST,…]]… [--cpus N] [--memory MiB] [--timeout D] -- CMD…\n" +
			"   with no CMD: an interactive shell",
		Description: "The current directory (or --workspace) is shared read-write as /workspace, where the command\n" +
			"runs. Nothing of the host environment enters the guest except --env, TERM, LANG, TZ and the\n" +
			"placeholders of --secret (never their values).\n" +
			"Without --policy only the AI providers' API hosts are reachable (api.anthropic.com,\n" +
			"api.openai.com, generativelanguage.googleapis.com), over HTTPS through capsem's MITM.\n" +
			"Every DNS query, flow, HTTP request, model call, file change and command is recorded;\n" +
			"the session id is printed at the end. Exit status: the command's (124 after --timeout).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "policy", Usage: "policy `FILE` (default: the AI providers' APIs only)"},
			&cli.StringFlag{Name: "workspace", Usage: "host `DIR` shared as /workspace (default: the current directory)"},
			&cli.StringSliceFlag{Name: "env", Usage: "`K=V` for the command (repeatable)"},
			secretFlag(),
			&cli.IntFlag{Name: "cpus", Value: defaultCPUs, Usage: "guest vCPUs"},
			&cli.IntFlag{Name: "memory", Value: defaultMemoryMiB, Usage: "guest memory in `MiB`"},
			publishCLIFlag(),
			archFlag(),
			&cli.DurationFlag{Name: "timeout", Usage: "kill the command after `D` (e.g. 10m; 0: never)"},
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "give the command a pty (default: when stdin and stdout are terminals)"},
			&cli.BoolFlag{Name: "no-tty", Usage: "never give the command a pty"},
			dataFlag(),
			caDirFlag(),
			&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "capsem's own log: debug, info, warn, error"},
			consoleLogMaxFlag(),
			coldFlag(),
		}, append(storeFlags(), dryRunFlags()...)...),
		Action: runAction,
	}
}

// runOptions are the parsed flags of `capsem run`.
type runOptions struct {
	argv      []string
	env       []string
	policy    *policy.Policy
	workspace string
	cpus, mem int
	timeout   time.Duration
	tty       bool
	data      string
	caDir     string
	log       *slog.Logger

	cold       bool                         // boot the kernel, not the boot snapshot
	consoleMax int64                        // the console log's cap in bytes (0: the default)
	storeOpts  store.Options                // the session store's limits (zero: the defaults)
	audit      otlp.Config                  // --audit-otlp and its flags (URL "": none)
	noStdin    bool                         // the command gets no input (doctor)
	onEvent    func(store.Event)            // sees each event of the session once it is recorded (doctor)
	publish    []ports.Spec                 // --publish: guest ports published on the host for the run
	published  func(ports.Spec)             // told each port in force, its host port picked (doctor)
	onSandbox  func(*sandbox.Sandbox) error // told the sandbox once its guest runs (doctor)
}

func parseRunOptions(c *cli.Context) (*runOptions, error) {
	o := &runOptions{argv: c.Args().Slice(), cpus: c.Int("cpus"), mem: c.Int("memory"), timeout: c.Duration("timeout"), data: c.String("data"), caDir: c.String("ca-dir"), consoleMax: c.Int64("console-log-max"), cold: c.Bool("cold")}
	if o.consoleMax < 0 {
		return nil, usageError{fmt.Errorf("--console-log-max %d: must not be negative", o.consoleMax)}
	}
	var err error
	if o.storeOpts, err = storeOptions(c); err != nil {
		return nil, err
	}
	if o.audit, err = auditOptions(c); err != nil {
		return nil, err
	}
	if o.publish, err = publishFlag(c); err != nil {
		return nil, err
	}
	if o.log, err = loglevel.Logger(c.App.ErrWriter, c.String("log-level")); err != nil {
		return nil, usageError{err}
	}
	if o.policy, err = sandbox.LoadBoundPolicy(c.String("policy"), c.StringSlice("secret"), nil); err != nil {
		return nil, err
	}
	o.workspace = c.String("workspace")
	if o.workspace == "" {
		if o.workspace, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if o.workspace, err = filepath.Abs(o.workspace); err != nil {
		return nil, err
	}
	if st, err := os.Stat(o.workspace); err != nil || !st.IsDir() {
		return nil, usageError{fmt.Errorf("--workspace %s: not a directory", o.workspace)}
	}
	if o.timeout < 0 {
		return nil, usageError{fmt.Errorf("--timeout %s: must not be negative", o.timeout)}
	}
	o.env, err = guestEnv(os.Environ(), c.StringSlice("env"))
	if err != nil {
		return nil, usageError{err}
	}
	senv, err := sandbox.SecretEnv(o.policy, o.env)
	if err != nil {
		return nil, err
	}
	o.env = append(o.env, senv...)
	switch {
	case c.Bool("tty") && c.Bool("no-tty"):
		return nil, usageError{errors.New("--tty and --no-tty: pick one")}
	case c.Bool("tty"):
		o.tty = true
	case c.Bool("no-tty"):
		o.tty = false
	default:
		o.tty = isTerminal(os.Stdin) && isTerminal(os.Stdout)
	}
	return o, nil
}

// eventTap is a session's recorder that also shows each event to see,
// after recording it.
type eventTap struct {
	*store.Writer
	see func(store.Event)
}

func (t eventTap) Append(ev store.Event) {
	t.Writer.Append(ev)
	t.see(ev)
}

// tapRecorder is w, or w with see tapping its events.
func tapRecorder(w *store.Writer, see func(store.Event)) netstack.Recorder {
	if see == nil {
		return w
	}
	return eventTap{w, see}
}

func consoleLogMaxFlag() cli.Flag {
	return &cli.Int64Flag{Name: "console-log-max", Usage: fmt.Sprintf("keep at most `BYTES` of the guest's console log: its start and its end (0: %d)", hypervisor.DefaultConsoleLogMax)}
}

// guestEnv is the environment a guest command gets from the host: the
// allowlisted host variables, then --env (which wins).
func guestEnv(host, flags []string) ([]string, error) {
	var env []string
	for _, kv := range host {
		k, _, _ := strings.Cut(kv, "=")
		for _, a := range hostEnvAllowlist {
			if k == a {
				env = append(env, kv)
			}
		}
	}
	for _, kv := range flags {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n\x00") {
			return nil, fmt.Errorf("--env %q: want KEY=value", kv)
		}
		env = append(env, kv)
	}
	return env, nil
}

func runAction(c *cli.Context) error {
	o, err := parseRunOptions(c)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		return runPlan(c, o)
	}
	if c.Bool("json") {
		return usageError{errors.New("--json goes with --dry-run")}
	}
	return runRecorded(c, o)
}

// runRecorded runs o.argv in a fresh guest as one recorded session and
// returns exitStatus(the command's code), or the error that kept it from
// running.
func runRecorded(c *cli.Context, o *runOptions) error {
	a, err := guestArch(c)
	if err != nil {
		return usageError{err}
	}
	if err := sandbox.CheckHypervisor(a); err != nil {
		return err
	}
	t0 := time.Now()
	phase := func(what string) { o.log.Debug(what, "elapsed", time.Since(t0).Round(time.Millisecond)) }
	ctx := c.Context
	guest, err := defaultGuest(ctx, c.App.ErrWriter, false, a)
	if err != nil {
		return err
	}
	authority, err := sandbox.LoadAuthority(o.caDir)
	if err != nil {
		return err
	}
	storeOpts := o.storeOpts
	if storeOpts.SealKey, err = ca.LoadOrCreateSealKey(o.caDir); err != nil {
		return err
	}

	// Published before the guest boots: a host port in use fails the run
	// at once.
	pub := ports.New(o.log)
	defer pub.Close()
	for _, sp := range o.publish {
		got, err := pub.Add(sp)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "capsem: %s on the host reaches the guest's port %d\n", got.HostAddr(), got.GuestPort)
		if o.published != nil {
			o.published(got)
		}
	}

	host, _ := os.Hostname()
	command := o.argv
	if len(command) == 0 {
		command = []string{"(interactive shell)"}
	}
	phase("guest image and CA ready")
	rs, err := sessionstore.Open(o.data, store.Session{Command: command, PolicySHA256: o.policy.SHA256, Image: guest.ID, Host: host}, storeOpts)
	if err != nil {
		return err
	}
	id := rs.ID()
	rs.Warn = func(msg string) { fmt.Fprintf(c.App.ErrWriter, "capsem: warning: %s\n", msg) }
	if err := rs.StartAudit(o.audit); err != nil {
		_ = rs.End(nil)
		return err
	}
	phase("session store open")
	ra, err := rs.ServeStoreCopies()
	if err != nil {
		// The run goes on; only reading its session before it ends fails.
		fmt.Fprintf(c.App.ErrWriter, "capsem: warning: the session cannot be read while it runs: %v\n", err)
	}

	stdin := c.App.Reader
	if o.noStdin {
		stdin = nil
	}
	code, runErr := runInSandbox(ctx, o, pub, sandbox.Config{
		Guest:       guest,
		Policy:      o.policy,
		Workspace:   o.workspace,
		CPUs:        o.cpus,
		MemoryMiB:   o.mem,
		Recorder:    tapRecorder(rs.W, o.onEvent),
		Authority:   authority,
		ConsoleLog:  home.SessionConsoleLog(o.data, id),
		ConsoleMax:  o.consoleMax,
		BootTimeout: hypervisor.DefaultBootTimeout,
		Logger:      o.log,
		Host:        hostName(),
	}, stdin, c.App.Writer, c.App.ErrWriter)

	phase("guest powered off")
	if ra != nil {
		ra.Close() // before the store closes: no snapshot of a closed store
	}
	var endCode *int
	if runErr == nil {
		endCode = &code
	}
	if err := rs.End(endCode); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("record the session: %w", err))
	}
	phase("events flushed")
	pending, merr := sessionstore.Merge(o.data, 5*time.Second)
	phase("session moved into the main store")
	if merr != nil {
		fmt.Fprintf(c.App.ErrWriter, "capsem: warning: %v\n", merr)
	}
	where := o.data
	if merr != nil || pending > 0 {
		if _, err := os.Stat(home.SessionEventsDir(o.data, id)); err == nil {
			where = home.SessionEventsDir(o.data, id) + " (moved into " + o.data + " by the next capsem command)"
		}
	}
	fmt.Fprintf(c.App.ErrWriter, "capsem: session %s, events in %s — capsem inspect %s\n", id, where, id)
	if runErr != nil {
		return runErr
	}
	return exitStatus(code)
}

// runInSandbox boots the guest, runs the command and powers the guest off
// again, whatever happens: the returned error is about capsem, the code is
// the command's.
func runInSandbox(ctx context.Context, o *runOptions, pub *ports.Publisher, cfg sandbox.Config, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	// Signals that arrive during boot tear the guest down too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	defer signal.Stop(sigs)

	type started struct {
		sb  *sandbox.Sandbox
		err error
	}
	ready := make(chan started, 1)
	go func() {
		var sb *sandbox.Sandbox
		var err error
		if o.cold {
			sb, err = sandbox.Start(ctx, cfg)
		} else {
			sb, err = sandbox.StartFromBoot(ctx, bootSnapshotRoot(), cfg)
		}
		ready <- started{sb, err}
	}()
	var sb *sandbox.Sandbox
	for sb == nil {
		select {
		case r := <-ready:
			if r.err != nil {
				return 0, r.err
			}
			sb = r.sb
		case sig := <-sigs:
			if sig == syscall.SIGWINCH {
				continue
			}
			cancel()
			r := <-ready
			if r.sb != nil {
				r.sb.Shutdown("capsem run was interrupted")
			}
			return 0, fmt.Errorf("interrupted by %v while booting", sig)
		}
	}
	defer sb.Shutdown("capsem run is done")
	pub.Attach(sb)
	if o.onSandbox != nil {
		if err := o.onSandbox(sb); err != nil {
			return 0, err
		}
	}
	o.log.Debug("guest ready", "uptime", time.Duration(sb.Ready().Uptime).Round(time.Millisecond))
	start := func(ex proto.Exec) (execSession, error) { return sb.Exec(context.Background(), ex) }
	eo := o.execOptions()
	eo.confirm = sb.Responsive // a guest that does not confirm a signal is stopped (deferred Shutdown)
	code, err := execute(start, eo, sigs, stdin, stdout, stderr)
	o.log.Debug("command done", "code", code)
	if err != nil && cfg.ConsoleLog != "" {
		err = fmt.Errorf("%w (the guest's console log: %s)", err, cfg.ConsoleLog)
	}
	return code, err
}

// execOptions is what execute needs of the run's options.
func (o *runOptions) execOptions() execOptions {
	return execOptions{argv: o.argv, env: o.env, tty: o.tty, timeout: o.timeout}
}

// hostName is how capsem names itself to the guest's agent.
func hostName() string { return "capsem " + version.String() }

func coldFlag() cli.Flag {
	return &cli.BoolFlag{Name: "cold", Usage: "boot the guest's kernel instead of restoring the boot snapshot (made once per image, size and CPU count)"}
}

// bootSnapshotRoot is where boot snapshots are kept: beside the images, in
// the cache.
func bootSnapshotRoot() string {
	root, err := image.DefaultCacheRoot()
	if err != nil {
		return "" // sandbox.BootSnapshot refuses it, and the kernel boots
	}
	return filepath.Join(root, "bootsnap")
}
