package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/home"
)

// A dry run (capsem start --dry-run, capsem run --dry-run) prints the plan
// — what the sandbox would be allowed and how it would be made — and
// creates nothing: no VM, no disk, no session, no image build. Values of
// --env variables are never printed, only their names: they may be
// secrets.

// plan is a dry run's output; its JSON keys are part of the CLI's
// interface.
type plan struct {
	Command   string         `json:"command"`           // "start" or "run"
	Sandbox   string         `json:"sandbox,omitempty"` // start: the name
	Exists    bool           `json:"exists"`            // start: the sandbox exists, and these are its stored settings with the flags applied
	Argv      []string       `json:"argv,omitempty"`    // run: the command ([] for a shell)
	Policy    policy.Summary `json:"policy"`
	Image     planImage      `json:"image"`
	CPUs      int            `json:"cpus"`
	MemoryMiB int            `json:"memory_mib"`
	DiskGiB   int            `json:"disk_gib,omitempty"` // start: the writable disk's cap
	Workspace string         `json:"workspace"`
	Data      string         `json:"data"`
	EnvNames  []string       `json:"env_names"`         // the variables the guest's commands get from the host (names only)
	Timeout   string         `json:"timeout,omitempty"` // run: --timeout
	// Ports are the guest ports published on the host (--publish; start:
	// the stored ones with the flags applied), in full form.
	Ports []string `json:"ports"`
}

// planImage is the guest a plan would boot.
type planImage struct {
	ID     string `json:"id,omitempty"` // "" when not built yet
	Arch   string `json:"arch"`         // amd64, arm64
	Kernel string `json:"kernel"`       // the pinned Debian package=version
	Built  bool   `json:"built"`
	Note   string `json:"note,omitempty"`
}

func dryRunFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Usage: "print the plan (allowed names and ports, request rules, image, size, workspace) and create nothing"},
		&cli.BoolFlag{Name: "json", Usage: "with --dry-run: the plan as JSON"},
	}
}

// defaultImagePlan is architecture a's default guest as the cache has it,
// without building it.
func defaultImagePlan(a arch.Arch) planImage {
	pi := planImage{Arch: a.String()}
	t, err := image.TargetFor(a)
	if err != nil {
		pi.Note = err.Error()
		return pi
	}
	pi.Kernel = t.Kernel.Package.String()
	agent, err := findAgent(a)
	if err != nil {
		pi.Note = err.Error()
		return pi
	}
	cache, err := image.DefaultCache()
	if err != nil {
		pi.Note = err.Error()
		return pi
	}
	g, ok, err := cache.FindDefault(agent, a)
	switch {
	case err != nil:
		pi.Note = err.Error()
	case ok:
		pi.ID, pi.Built = g.ID, true
	default:
		pi.Note = "not built yet: the first start or run builds it (a few minutes, once), or capsem image build"
	}
	return pi
}

func envNames(env []string) []string {
	out := []string{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		out = append(out, k)
	}
	return out
}

// printPlan writes p as JSON or as a table a person reads.
func printPlan(w io.Writer, p plan, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(p)
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "-"
		}
		return strings.Join(l, ", ")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	what := "capsem run"
	if p.Command == "start" {
		what = "capsem start " + p.Sandbox
		if p.Exists {
			what += " (exists: its stored settings, with the flags given)"
		} else {
			what += " (new)"
		}
	}
	fmt.Fprintf(tw, "plan of\t%s — nothing was created\n", what)
	if p.Command == "run" {
		fmt.Fprintf(tw, "command\t%s\n", list(p.Argv))
	}
	fmt.Fprintf(tw, "policy\t%s (sha256 %.12s)\n", p.Policy.Source, p.Policy.SHA256)
	fmt.Fprintf(tw, "  allowed names and ports\t%s (443 where no port is written)\n", list(p.Policy.Allow))
	fmt.Fprintf(tw, "  denied\t%s\n", list(p.Policy.Deny))
	fmt.Fprintf(tw, "  request rules\t%s\n", list(p.Policy.HTTP))
	fmt.Fprintf(tw, "  TLS not intercepted\t%s\n", list(p.Policy.Passthrough))
	fmt.Fprintf(tw, "  host services\t%s\n", list(p.Policy.Forwards))
	if x := p.Policy.Proxy; x != "" {
		if p.Policy.ProxySecret != "" {
			x += " (credentials: secret " + p.Policy.ProxySecret + ")"
		}
		if len(p.Policy.NoProxy) > 0 {
			x += "; direct: " + list(p.Policy.NoProxy)
		}
		fmt.Fprintf(tw, "  upstream through the proxy\t%s\n", x)
	}
	unknown := "refused"
	if p.Policy.Unknown == policy.UnknownAsk {
		unknown = fmt.Sprintf("held while a person is asked (capsem ask), up to %d s", p.Policy.AskTimeoutS)
	}
	fmt.Fprintf(tw, "  names and ports no entry names\t%s\n", unknown)
	fmt.Fprintf(tw, "  MCP tools no rule names\t%s\n", p.Policy.MCPUnknown)
	if p.Command == "start" {
		fmt.Fprintf(tw, "  answered \"always\" when asked\t%s\n", list(p.Policy.Asked))
	}
	fmt.Fprintf(tw, "published ports\t%s\n", list(p.Ports))
	img := p.Image.ID
	if !p.Image.Built {
		img = "(" + p.Image.Note + ")"
	}
	fmt.Fprintf(tw, "image\t%s, %s, kernel %s\n", img, p.Image.Arch, p.Image.Kernel)
	fmt.Fprintf(tw, "size\t%d vCPUs, %d MiB", p.CPUs, p.MemoryMiB)
	if p.DiskGiB > 0 {
		fmt.Fprintf(tw, ", disk %d GiB (sparse)", p.DiskGiB)
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "workspace\t%s (as /workspace)\n", p.Workspace)
	fmt.Fprintf(tw, "data\t%s\n", p.Data)
	fmt.Fprintf(tw, "environment from the host\t%s (names only)\n", list(p.EnvNames))
	if p.Timeout != "" {
		fmt.Fprintf(tw, "timeout\t%s\n", p.Timeout)
	}
	return tw.Flush()
}

// startPlan is capsem start --dry-run's plan.
func startPlan(c *cli.Context, d home.Dir) error {
	s, fresh, err := resolveSettings(c, d, nil)
	if err != nil {
		return err
	}
	pol, err := sandbox.LoadPolicy(s.Policy, nil)
	if err != nil {
		return usageError{err}
	}
	kept, err := d.Overlay().Grants()
	if err == nil {
		pol, err = pol.WithGrants(kept)
	}
	if err != nil {
		return usageError{fmt.Errorf("%w; fix or remove %s", err, d.OverlayPath())}
	}
	p := plan{Command: "start", Sandbox: d.Name, Exists: !fresh, Policy: pol.Summarize(), CPUs: s.CPUs, MemoryMiB: s.MemoryMiB,
		DiskGiB: s.DiskGiB, Workspace: s.Workspace, Data: c.String("data"), EnvNames: envNames(s.Env), Ports: append([]string{}, s.Ports...)}
	if fresh {
		p.Image = defaultImagePlan(s.GuestArch())
	} else {
		p.Image = planImage{ID: s.Image, Arch: s.GuestArch().String(), Built: true, Note: "the image the sandbox was created on"}
		if t, err := image.TargetFor(s.GuestArch()); err == nil {
			p.Image.Kernel = t.Kernel.Package.String()
		}
	}
	return printPlan(c.App.Writer, p, c.Bool("json"))
}

// runPlan is capsem run --dry-run's plan.
func runPlan(c *cli.Context, o *runOptions) error {
	a, err := guestArch(c)
	if err != nil {
		return usageError{err}
	}
	p := plan{Command: "run", Argv: append([]string{}, o.argv...), Policy: o.policy.Summarize(), Image: defaultImagePlan(a),
		CPUs: o.cpus, MemoryMiB: o.mem, Workspace: o.workspace, Data: o.data, EnvNames: envNames(o.env), Ports: []string{}}
	for _, sp := range o.publish {
		p.Ports = append(p.Ports, sp.String())
	}
	if o.timeout > 0 {
		p.Timeout = o.timeout.Round(time.Millisecond).String()
	}
	return printPlan(c.App.Writer, p, c.Bool("json"))
}
