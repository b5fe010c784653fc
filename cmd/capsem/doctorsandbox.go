package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/guest/diagnostics"
	"github.com/capsem/capsem/sandbox/api"
)

// doctorInSandbox runs the suite in the running sandbox name: the suite is
// put into the guest's /tmp (never its workspace: that is the user's)
// through the API, pytest runs under the sandbox's own policy, and the
// suite is removed after. Exit status: pytest's.
func doctorInSandbox(c *cli.Context, name string) error {
	client, _, err := runningClient(c, name)
	if err != nil {
		return err
	}
	defer client.Close()
	var src fs.FS = diagnostics.Files
	if dir := c.String("suite"); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return usageError{fmt.Errorf("--suite %s: not a directory", dir)}
		}
		src = os.DirFS(dir)
	}
	files, err := fs.Glob(src, "*.py")
	if err != nil || len(files) == 0 {
		return fmt.Errorf("the diagnostics suite has no *.py files (%v)", err)
	}
	dir := fmt.Sprintf("/tmp/capsem-doctor-%d", os.Getpid())
	for _, f := range files {
		b, err := fs.ReadFile(src, f)
		if err != nil {
			return err
		}
		if err := client.PutFile(c.Context, path.Join(dir, f), bytes.NewReader(b), "0644"); err != nil {
			return fmt.Errorf("put the suite into sandbox %s: %w", name, err)
		}
	}
	defer func() {
		if s, err := client.Exec(c.Context, api.ExecRequest{Argv: []string{"rm", "-rf", dir}}); err == nil {
			_, _ = s.Wait()
		}
	}()
	env := []string{
		"CAPSEM_DOCTOR=1",
		"CAPSEM_DOCTOR_MODE=sandbox",
		"CAPSEM_DOCTOR_DENIED=" + doctorDenied,
		"PYTHONDONTWRITEBYTECODE=1",
	}
	return execInSandbox(c, name, execOptions{argv: pytestArgv(c, dir), env: env})
}
