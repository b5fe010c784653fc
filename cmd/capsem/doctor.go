package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/cmd/internal/loglevel"
	"github.com/capsem/capsem/guest/bootparam"
	"github.com/capsem/capsem/guest/diagnostics"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/ports"
	"github.com/capsem/capsem/sandbox"
)

// The names the doctor's policy is about (see doctorPolicy).
const (
	doctorHost   = "allowed.doctor.test" // allowed on 443, backed by the doctor's upstream
	doctorDenied = "denied.doctor.test"  // not in the policy
	// doctorWild is a zone whose every subdomain the policy allows
	// ("*.wild.doctor.test"), at most doctorWildCap distinct names a
	// session ([dns] max_wildcard_names): the pool-exhaustion attack.
	doctorWild    = "wild.doctor.test"
	doctorWildCap = 256
	// doctorWorkspaceOwner owns the doctor's workspace when the doctor runs
	// as root, so that QEMU runs as that user and the guest's files are
	// its, as they are a user's who runs capsem in their own directory.
	doctorWorkspaceOwner = 65534
	// doctorSuiteDir is where the suite lands in the guest's workspace.
	doctorSuiteDir = ".capsem-doctor"
	// doctorHostFile is a file the host writes into the workspace before boot.
	doctorHostFile    = "host-file.txt"
	doctorHostContent = "written by the host\n"

	// The doctor's MCP servers (see doctorPolicy): doctorMCPServer is
	// capsem mcp-test-server run by the gateway with its env and crash
	// tools denied; doctorMCPEnvServer is the same program with every
	// tool allowed and doctorMCPMark in its env, so that the guest can
	// read which variables the gateway gave the process.
	doctorMCPServer    = "doctor"
	doctorMCPEnvServer = "doctor-env"
	doctorMCPMark      = "DOCTOR_MARK"
	// doctorHostOnlyVar is set in the doctor's own process and must not
	// reach a stdio server, which gets only PATH, HOME and its env.
	doctorHostOnlyVar = "CAPSEM_DOCTOR_HOST_ONLY"
	// doctorMCPPath and doctorMCPJSONPath are the remote MCP server on
	// doctorHost (event-stream and JSON responses), whose env tool an
	// [[mcp.rules]] entry on doctorHost denies. It is served in the
	// doctor's process (testserver.NewInProcess): it has no crash tool, and
	// its env tool reads nothing of the doctor's environment.
	doctorMCPPath     = "/mcp"
	doctorMCPJSONPath = "/mcp-json"
	// doctorPublished is the guest port the doctor publishes on a free
	// host port (--publish 0:PORT), doctorUnpublished one it does not:
	// the upstream's /reach tries both from the host.
	doctorPublished   = 8765
	doctorUnpublished = 8766
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "run capsem-doctor, the in-guest test suite that proves the sandbox holds (or check the host with --host)",
		UsageText: "capsem doctor [-k EXPR] [-x] [-v] [--suite DIR]\n" +
			"   capsem doctor --sandbox NAME [-k EXPR] [-x] [-v] [--suite DIR]\n" +
			"   capsem doctor --host",
		Description: "Boots a guest with the doctor's policy and a local upstream the host side serves, runs the pytest\n" +
			"suite of guest/diagnostics in it (embedded in capsem; --suite DIR runs a directory instead, so a\n" +
			"changed test needs no rebuild) and exits with pytest's code. --sandbox NAME runs the suite in a running\n" +
			"sandbox instead, under its own policy: the tests that need the doctor's upstream skip, the walls are\n" +
			"checked as that sandbox has them. --host checks this machine instead.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "k", Usage: "only the tests matching pytest `EXPR`"},
			&cli.BoolFlag{Name: "x", Usage: "stop at the first failure"},
			&cli.BoolFlag{Name: "v", Usage: "one line per test"},
			&cli.StringFlag{Name: "suite", Usage: "run the *.py files of `DIR` instead of the embedded suite"},
			&cli.BoolFlag{Name: "host", Usage: "check the host (QEMU, accelerator, image, CA, store) instead"},
			&cli.StringFlag{Name: "sandbox", Usage: "run the suite inside the running sandbox `NAME`, under its own policy"},
			dataFlag(),
			&cli.StringFlag{Name: "ca-dir", Usage: "interception CA `DIR` (default: capsem ca path)"},
			&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "capsem's own log: debug, info, warn, error"},
			coldFlag(),
			archFlag(),
			// For the doctor's own tests: a policy broken on purpose must
			// make the matching diagnostic fail.
			&cli.StringSliceFlag{Name: "also-allow", Hidden: true, Usage: "add `NAME[:PORT]` to the doctor policy's allow list"},
		},
		Action: doctorAction,
	}
}

func doctorAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (pytest options: -k, -x, -v)", c.Args().First())}
	}
	if c.Bool("host") {
		return hostCheck(c)
	}
	if name := c.String("sandbox"); name != "" {
		return doctorInSandbox(c, name)
	}
	log, err := loglevel.Logger(c.App.ErrWriter, c.String("log-level"))
	if err != nil {
		return usageError{err}
	}

	work, err := os.MkdirTemp("", "capsem-doctor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ws := filepath.Join(work, "workspace")
	if err := stageSuite(c.String("suite"), filepath.Join(ws, doctorSuiteDir)); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("doctor: the path of capsem itself, for the MCP test server and the HTTP/3 client: %w", err)
	}
	guestSuite := path.Join(bootparam.WorkspacePath, doctorSuiteDir)
	a, err := guestArch(c)
	if err != nil {
		return usageError{err}
	}
	h3Env, err := stageH3Get(exe, a, filepath.Join(ws, doctorSuiteDir), guestSuite)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ws, doctorHostFile), []byte(doctorHostContent), 0o644); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if err := chownTree(ws, doctorWorkspaceOwner); err != nil {
			return err
		}
	}

	up, err := startDoctorUpstream(work, ws)
	if err != nil {
		return fmt.Errorf("doctor upstream: %w", err)
	}
	defer up.Close()
	polText := doctorPolicy(up, exe, c.StringSlice("also-allow"))
	pol, err := policy.Parse(filepath.Join(work, "doctor-policy.toml"), []byte(polText))
	if err != nil {
		return fmt.Errorf("doctor policy: %w", err)
	}
	asks := &doctorAsks{base: pol}
	if asks.asking, err = askingPolicy(pol.Source, polText); err != nil {
		return fmt.Errorf("doctor policy: %w", err)
	}
	defer asks.Close()
	up.asks = asks
	mcpRules := ruleHeaders(polText, "[[mcp.rules]]")
	if len(mcpRules) != 2 {
		return fmt.Errorf("doctor policy: %d [[mcp.rules]] entries, want 2", len(mcpRules))
	}
	// The gateway starts the test servers from this process: a value here
	// that reaches one is capsem's environment leaking into a server.
	mark := make([]byte, 8)
	_, _ = rand.Read(mark)
	if err := os.Setenv(doctorHostOnlyVar, hex.EncodeToString(mark)); err != nil {
		return err
	}

	o := &runOptions{
		argv: pytestArgv(c, guestSuite),
		env: []string{
			"CAPSEM_DOCTOR=1",
			// What uname -m must say: the architecture the image was built for.
			"CAPSEM_DOCTOR_ARCH=" + a.Uname(),
			"CAPSEM_DOCTOR_HOST=" + doctorHost,
			"CAPSEM_DOCTOR_DENIED=" + doctorDenied,
			"CAPSEM_DOCTOR_ASKED=" + doctorAsked,
			"CAPSEM_DOCTOR_WILD=" + doctorWild,
			fmt.Sprintf("CAPSEM_DOCTOR_WILD_CAP=%d", doctorWildCap),
			"CAPSEM_DOCTOR_MCP_SERVER=" + doctorMCPServer,
			"CAPSEM_DOCTOR_MCP_ENV_SERVER=" + doctorMCPEnvServer,
			"CAPSEM_DOCTOR_MCP_MARK=" + doctorMCPMark,
			"CAPSEM_DOCTOR_MCP_HOST_ONLY_VAR=" + doctorHostOnlyVar,
			"CAPSEM_DOCTOR_MCP_PATH=" + doctorMCPPath,
			"CAPSEM_DOCTOR_MCP_JSON_PATH=" + doctorMCPJSONPath,
			// How the refusals must name the rules: their number and the
			// line of their header, counted here from the text.
			fmt.Sprintf("CAPSEM_DOCTOR_MCP_GATEWAY_RULE=mcp.rules[1] (line %d)", mcpRules[0]),
			fmt.Sprintf("CAPSEM_DOCTOR_MCP_HOST_RULE=mcp.rules[2] (line %d)", mcpRules[1]),
			h3Env,
			fmt.Sprintf("CAPSEM_DOCTOR_PUBLISHED=%d", doctorPublished),
			fmt.Sprintf("CAPSEM_DOCTOR_UNPUBLISHED=%d", doctorUnpublished),
			"PYTHONDONTWRITEBYTECODE=1",
		},
		policy:    pol,
		workspace: ws,
		cpus:      2,
		mem:       2048,
		timeout:   20 * time.Minute,
		data:      c.String("data"),
		caDir:     c.String("ca-dir"),
		log:       log,
		noStdin:   true,
		onEvent:   up.recordEvent,
		cold:      c.Bool("cold"),
		publish:   []ports.Spec{{HostIP: ports.DefaultHostIP, GuestPort: doctorPublished}},
		published: up.setPublished,
		onSandbox: func(sb *sandbox.Sandbox) error { return asks.attach(sb, work) },
	}
	return runRecorded(c, o)
}

// pytestArgv runs the suite in dir with the doctor's pytest flags.
func pytestArgv(c *cli.Context, dir string) []string {
	argv := []string{"python3", "-m", "pytest", "-p", "no:cacheprovider", "-rfEs", "--color=no", dir}
	if k := c.String("k"); k != "" {
		argv = append(argv, "-k", k)
	}
	if c.Bool("x") {
		argv = append(argv, "-x")
	}
	if c.Bool("v") {
		argv = append(argv, "-v")
	} else {
		argv = append(argv, "-q")
	}
	return argv
}

// doctorPolicy allows the doctor's host on 443 only, sends it to the local
// upstream, trusts the upstream's CA, and refuses /admin/ on it. Its MCP
// gateway runs exe's mcp-test-server as two servers; the env and crash
// tools of doctorMCPServer and the env tool of the doctor host's remote
// server are denied.
func doctorPolicy(up *doctorUpstream, exe string, also []string) string {
	allow := []string{fmt.Sprintf("%q", doctorHost), fmt.Sprintf("%q", "*."+doctorWild)}
	for _, a := range also {
		allow = append(allow, fmt.Sprintf("%q", a))
	}
	return fmt.Sprintf(`# capsem doctor's policy
[network]
default = "deny"
allow = [%s]

[dns]
max_wildcard_names = %d

[upstream]
resolve = { %q = "127.0.0.1:%d", %q = "127.0.0.1:%d" }
ca_files = [%q]

[[http]]
host = %q
paths = ["/admin/*"]
action = "deny"

[mcp.servers.%s]
command = [%q, "mcp-test-server"]

[mcp.servers.%s]
command = [%q, "mcp-test-server"]
env = { %s = "capsem-doctor-mark" }

[[mcp.rules]]
server = %q
tools = ["env", "crash"]
action = "deny"

[[mcp.rules]]
server = %q
tools = ["env"]
action = "deny"
`, strings.Join(allow, ", "), doctorWildCap, doctorHost, up.port, doctorAsked, up.port, up.caFile, doctorHost,
		doctorMCPServer, exe, doctorMCPEnvServer, exe, doctorMCPMark, doctorMCPServer, doctorHost)
}

// ruleHeaders returns the lines (from 1) of text that are header, in order.
func ruleHeaders(text, header string) []int {
	var lines []int
	for i, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == header {
			lines = append(lines, i+1)
		}
	}
	return lines
}

// chownTree gives dir and everything in it to uid (and the group of the
// same number).
func chownTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// stageSuite copies the suite (dir, or the embedded one) into dst.
func stageSuite(dir, dst string) error {
	var src fs.FS = diagnostics.Files
	if dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return usageError{fmt.Errorf("--suite %s: not a directory", dir)}
		}
		src = os.DirFS(dir)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	files, err := fs.Glob(src, "*.py")
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return errors.New("the diagnostics suite has no *.py files")
	}
	for _, f := range files {
		b, err := fs.ReadFile(src, f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
