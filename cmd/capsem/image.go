package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/guest/image"
	"github.com/capsem/capsem/store"
)

// agentName is the guest agent's executable, installed next to capsem.
const agentName = "capsem-agent"

// fixError is an error with the command that fixes it.
type fixError struct {
	err error
	fix string
}

func (e *fixError) Error() string { return e.err.Error() + "\n  fix: " + e.fix }
func (e *fixError) Unwrap() error { return e.err }

// findAgent locates the static capsem-agent binary that becomes the guest's
// /init: $CAPSEM_AGENT, else next to the capsem executable.
func findAgent() (string, error) {
	if p := os.Getenv("CAPSEM_AGENT"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("CAPSEM_AGENT: %w", err)
		}
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(exe), agentName)
	if _, err := os.Stat(p); err != nil {
		return "", &fixError{
			err: fmt.Errorf("the guest agent %s is not next to capsem (%s)", agentName, p),
			fix: "go tool task build   (builds bin/capsem and bin/capsem-agent), or set CAPSEM_AGENT to a static capsem-agent",
		}
	}
	return p, nil
}

// defaultGuest returns the default guest, building what is missing (the
// first run takes a few minutes; progress goes to progress).
func defaultGuest(ctx context.Context, progress io.Writer, force bool) (*image.Guest, error) {
	agent, err := findAgent()
	if err != nil {
		return nil, err
	}
	cache, err := image.DefaultCache()
	if err != nil {
		return nil, err
	}
	if !force {
		g, ok, err := cache.FindDefault(agent)
		if err != nil {
			return nil, err
		}
		if ok {
			return g, nil
		}
		fmt.Fprintln(progress, "capsem: the default guest image is not built yet; building it (a few minutes, once)")
	}
	g, err := cache.BuildDefault(ctx, image.BuildOptions{Agent: agent, Progress: progress, Force: force})
	if err != nil {
		err = fmt.Errorf("build the guest image: %w", err)
		if ctx.Err() != nil || image.RootfsPreflight() == nil {
			// Interrupted, or the tools are all there: installing them
			// again is not the fix; the error says what went wrong.
			return nil, err
		}
		return nil, &fixError{err: err, fix: "go tool task deps   (installs mmdebstrap, erofs-utils, npm, uidmap, the guest kernel), then capsem image build"}
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
				UsageText: "capsem image build [--force]",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "rebuild even what is cached"}},
				Action: func(c *cli.Context) error {
					start := time.Now()
					g, err := defaultGuest(c.Context, c.App.ErrWriter, c.Bool("force"))
					if err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "default guest %s (kernel %s, %s) ready in %v\n  kernel    %s\n  initramfs %s\n  rootfs    %s\n",
						g.ID, g.KernelRelease, store.FormatSize(g.Size), time.Since(start).Round(time.Second), g.Kernel, g.Initramfs, g.Rootfs)
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
					fmt.Fprintln(tw, "KIND\tKEY\tSIZE\tMODIFIED\tPATH")
					for _, e := range entries {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Kind, e.Key, store.FormatSize(e.Size), e.Modified.Local().Format("2006-01-02 15:04"), e.Path)
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
