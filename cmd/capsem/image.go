package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/guest/arch"
	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/store"
)

// fixError is an error with the command that fixes it.
type fixError struct {
	err error
	fix string
}

func (e *fixError) Error() string { return e.err.Error() + "\n  fix: " + e.fix }
func (e *fixError) Unwrap() error { return e.err }

// agentEnv is the variable that names the agent built for a in place of
// the one next to capsem: CAPSEM_AGENT for the host's architecture,
// CAPSEM_AGENT_ARM64 (…) for another.
func agentEnv(a arch.Arch) string {
	if a == arch.Host() {
		return "CAPSEM_AGENT"
	}
	return "CAPSEM_AGENT_" + strings.ToUpper(a.String())
}

// findAgent locates the static capsem-agent binary built for a that
// becomes the guest's /init: $CAPSEM_AGENT (agentEnv), else next to the
// capsem executable (image.AgentFile: capsem-agent, capsem-agent-arm64).
func findAgent(a arch.Arch) (string, error) {
	if p := os.Getenv(agentEnv(a)); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: %w", agentEnv(a), err)
		}
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	name := image.AgentFile(a)
	p := filepath.Join(filepath.Dir(exe), name)
	if _, err := os.Stat(p); err != nil {
		return "", &fixError{
			err: fmt.Errorf("the %s guest agent %s is not next to capsem (%s)", a, name, p),
			fix: fmt.Sprintf("go tool task build   (builds bin/capsem, bin/capsem-agent and the other architecture's agent), or set %s to a static %s capsem-agent", agentEnv(a), a),
		}
	}
	return p, nil
}

// archFlag is --arch: the guest's architecture.
func archFlag() cli.Flag {
	return &cli.StringFlag{Name: "arch", Usage: "the guest's `ARCH`: amd64 (x86_64) or arm64 (aarch64), default the host's; a foreign one runs under emulation (TCG)"}
}

// guestArch is the --arch flag's architecture, the host's without it.
func guestArch(c *cli.Context) (arch.Arch, error) { return arch.Parse(c.String("arch")) }

// defaultGuest returns architecture a's default guest, building what is
// missing (the first run takes a few minutes; progress goes to progress).
func defaultGuest(ctx context.Context, progress io.Writer, force bool, a arch.Arch) (*image.Guest, error) {
	agent, err := findAgent(a)
	if err != nil {
		return nil, err
	}
	cache, err := image.DefaultCache()
	if err != nil {
		return nil, err
	}
	if !force {
		g, ok, err := cache.FindDefault(agent, a)
		if err != nil {
			return nil, err
		}
		if ok {
			return g, nil
		}
		fmt.Fprintf(progress, "capsem: the default %s guest image is not built yet; building it (a few minutes, once)\n", a)
	}
	g, err := cache.BuildDefault(ctx, image.BuildOptions{Agent: agent, Arch: a, Progress: progress, Force: force})
	if err != nil {
		err = fmt.Errorf("build the guest image: %w", err)
		if ctx.Err() != nil || image.RootfsPreflight(a) == nil {
			// Interrupted, or the tools are all there: installing them
			// again is not the fix; the error says what went wrong.
			return nil, err
		}
		fix := "go tool task deps   (installs mmdebstrap, erofs-utils, npm, uidmap, the guest kernel), then capsem image build"
		if a.Foreign() {
			fix = fmt.Sprintf("go tool task deps:%s   (also qemu-user-static, binfmt_misc, %s's apt lists and QEMU), then capsem image build --arch %s", a, a, a)
		}
		return nil, &fixError{err: err, fix: fix}
	}
	return g, nil
}

func imageCommand() *cli.Command {
	return &cli.Command{
		Name:  "image",
		Usage: "build, list and remove the guest images in the cache",
		Subcommands: []*cli.Command{
			{
				Name:      "build",
				Usage:     "build the default guest (kernel, initramfs with the agent, root filesystem)",
				UsageText: "capsem image build [--arch ARCH] [--force]",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "rebuild even what is cached"}, archFlag()},
				Action: func(c *cli.Context) error {
					start := time.Now()
					a, err := guestArch(c)
					if err != nil {
						return err
					}
					g, err := defaultGuest(c.Context, c.App.ErrWriter, c.Bool("force"), a)
					if err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "default %s guest %s (kernel %s, %s) ready in %v\n  kernel    %s\n  initramfs %s\n  rootfs    %s\n",
						g.Arch, g.ID, g.KernelRelease, store.FormatSize(g.Size), time.Since(start).Round(time.Second), g.Kernel, g.Initramfs, g.Rootfs)
					return nil
				},
			},
			{
				Name:      "ls",
				Usage:     "list the cached kernels, initramfs images, root filesystems and downloads",
				UsageText: "capsem image ls",
				Action: func(c *cli.Context) error {
					cache, err := image.DefaultCache()
					if err != nil {
						return err
					}
					entries, err := cache.List()
					if err != nil {
						return err
					}
					if len(entries) == 0 {
						fmt.Fprintf(c.App.Writer, "nothing cached in %s (capsem image build makes the default guest)\n", cache.Root)
						return nil
					}
					tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "KIND\tARCH\tKEY\tSIZE\tMODIFIED\tPATH")
					for _, e := range entries {
						a := e.Arch.String()
						if a == "" {
							a = "-"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Kind, a, e.Key, store.FormatSize(e.Size), e.Modified.Local().Format("2006-01-02 15:04"), e.Path)
					}
					return tw.Flush()
				},
			},
			{
				Name:      "rm",
				Usage:     "remove cached entries by key (or a unique key prefix)",
				UsageText: "capsem image rm KEY…",
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return usageError{errors.New("image rm: give the KEY of each entry to remove (see capsem image ls)")}
					}
					cache, err := image.DefaultCache()
					if err != nil {
						return err
					}
					var errs []error
					for _, k := range c.Args().Slice() {
						if err := cache.Remove(k); err != nil {
							errs = append(errs, err)
							continue
						}
						fmt.Fprintf(c.App.Writer, "removed %s\n", k)
					}
					return errors.Join(errs...)
				},
			},
		},
	}
}
