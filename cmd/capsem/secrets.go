package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/mitm"
	"github.com/capsem/capsem/policy"
)

// secretFlag is --secret, which run and start share.
func secretFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "secret", Usage: "give the guest a placeholder for the host variable `NAME[@HOST,…]`, replaced by its real value only in requests to HOST (without @: the provider's API host for well-known names like ANTHROPIC_API_KEY) (repeatable)"}
}

// parseSecretFlags reads the --secret values.
func parseSecretFlags(vals []string) ([]policy.Secret, error) {
	var out []policy.Secret
	for _, v := range vals {
		s, err := policy.ParseSecretFlag(v)
		if err != nil {
			return nil, usageError{err}
		}
		out = append(out, s)
	}
	return out, nil
}

// loadBoundPolicy loads the policy at path (the default policy for "")
// with the --secret flags, and binds its secrets: real values from this
// process's environment and files, placeholders kept from keep or made
// anew. A policy error or a missing real value is a usage error (exit 2)
// that names it.
func loadBoundPolicy(path string, flags []string, keep map[string]string) (*policy.Policy, error) {
	secrets, err := parseSecretFlags(flags)
	if err != nil {
		return nil, err
	}
	pol, err := loadPolicyWith(path, secrets)
	if err != nil {
		return nil, usageError{err}
	}
	pol, err = mitm.BindSecrets(pol, keep, nil)
	if err != nil {
		return nil, usageError{err}
	}
	return pol, nil
}

// secretEnv is the guest's environment entries of pol's secrets: each
// NAME=placeholder. A --env of the same name is an error: the guest would
// get one of two values.
func secretEnv(pol *policy.Policy, env []string) ([]string, error) {
	var out []string
	for _, s := range pol.Secrets() {
		if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, s.Name+"=") }) {
			return nil, usageError{fmt.Errorf("--env %s and the secret %s: the guest gets the secret's placeholder under that name; drop the --env", s.Name, s.Name)}
		}
		out = append(out, s.Name+"="+s.InForce())
	}
	return out, nil
}
