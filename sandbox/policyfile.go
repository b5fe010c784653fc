package sandbox

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"github.com/capsem/capsem/mitm"
	"github.com/capsem/capsem/policy"
)

// defaultPolicy is the policy of a sandbox or run given none: the AI
// providers' API hosts on 443, nothing else.
//
//go:embed defaultpolicy.toml
var defaultPolicy []byte

// ConfigError is an error in what the user gave — a policy file, a
// --secret flag, a secret's real value missing from the environment, an
// --env that clashes with a secret — theirs to fix, not capsem's: the CLI
// exits 2 on it, the API answers 422.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// LoadPolicy reads the policy file at path, or the default policy when
// path is "", with the secrets of --secret flags (none: nil).
func LoadPolicy(path string, secrets []policy.Secret) (*policy.Policy, error) {
	if path == "" {
		return policy.ParseWith("default policy", defaultPolicy, secrets)
	}
	return policy.LoadWith(path, secrets)
}

// PolicyName is how a policy file is named to the user.
func PolicyName(path string) string {
	if path == "" {
		return "(the default policy)"
	}
	return path
}

// ParseSecretFlags reads --secret values (NAME[@HOST,…]); an error is a
// ConfigError naming the value.
func ParseSecretFlags(vals []string) ([]policy.Secret, error) {
	var out []policy.Secret
	for _, v := range vals {
		s, err := policy.ParseSecretFlag(v)
		if err != nil {
			return nil, &ConfigError{err}
		}
		out = append(out, s)
	}
	return out, nil
}

// LoadBoundPolicy loads the policy at path (the default policy for "")
// with the --secret flags, and binds its secrets: real values from this
// process's environment and files, placeholders kept from keep (a running
// guest holds them) or made anew. Every error is a ConfigError that names
// what to fix.
func LoadBoundPolicy(path string, flags []string, keep map[string]string) (*policy.Policy, error) {
	secrets, err := ParseSecretFlags(flags)
	if err != nil {
		return nil, err
	}
	pol, err := LoadPolicy(path, secrets)
	if err != nil {
		return nil, &ConfigError{err}
	}
	pol, err = mitm.BindSecrets(pol, keep, nil)
	if err != nil {
		return nil, &ConfigError{err}
	}
	return pol, nil
}

// SecretEnv is the guest's environment entries of pol's secrets: each
// NAME=placeholder. An entry of env with the same name is a ConfigError:
// the guest would get one of two values.
func SecretEnv(pol *policy.Policy, env []string) ([]string, error) {
	var out []string
	for _, s := range pol.Secrets() {
		if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, s.Name+"=") }) {
			return nil, &ConfigError{fmt.Errorf("--env %s and the secret %s: the guest gets the secret's placeholder under that name; drop the --env", s.Name, s.Name)}
		}
		out = append(out, s.Name+"="+s.InForce())
	}
	return out, nil
}
