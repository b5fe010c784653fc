package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/home"
)

// checkSandboxName is home.CheckName as a usage error (exit 2).
func checkSandboxName(name string) error {
	if err := home.CheckName(name); err != nil {
		return usageError{err}
	}
	return nil
}

// sandboxArg is the sandbox a command's one argument names, under --data.
func sandboxArg(c *cli.Context) (home.Dir, error) {
	if c.NArg() != 1 {
		return home.Dir{}, usageError{fmt.Errorf("want one sandbox NAME, got %d arguments", c.NArg())}
	}
	name := c.Args().First()
	if err := checkSandboxName(name); err != nil {
		return home.Dir{}, err
	}
	return home.New(dataOf(c), name), nil
}

// policyFileSHA is the sha256 of a policy file as the policy package
// computes it ("" when it cannot be read).
func policyFileSHA(path string) string {
	p, err := sandbox.LoadPolicy(path, nil)
	if err != nil {
		return ""
	}
	return p.SHA256
}
