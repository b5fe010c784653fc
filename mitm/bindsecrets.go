package mitm

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/capsem/capsem/policy"
)

// maxSecretFileBytes bounds what is read of a from_file: its first line is
// a credential, not a document.
const maxSecretFileBytes = 64 << 10

// MissingSecretError is a secret whose real value is not there: an unset
// or empty host variable, or a file that cannot be read or is empty. The
// commands exit 2 with it (a usage error: the user fixes the environment).
type MissingSecretError struct {
	Name string // the secret
	Msg  string
}

func (e *MissingSecretError) Error() string { return "mitm: secret " + e.Name + ": " + e.Msg }

// BindSecrets returns pol with its secrets' real values and placeholders:
// each real value from its host variable (getenv; nil means os.LookupEnv)
// or the first line of its file; each placeholder the fixed one of the
// policy, else keep's for the name (a reload keeps what the guest already
// holds), else a new "capsem-secret-" + 32 random hex digits. A policy
// without secrets is returned as it is.
func BindSecrets(pol *policy.Policy, keep map[string]string, getenv func(string) (string, bool)) (*policy.Policy, error) {
	if len(pol.Secrets()) == 0 {
		return pol, nil
	}
	if getenv == nil {
		getenv = os.LookupEnv
	}
	vals := map[string]policy.SecretValue{}
	var errs []error
	for _, s := range pol.Secrets() {
		real, err := readSecret(s, getenv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ph := s.Placeholder
		if ph == "" {
			ph = keep[s.Name]
		}
		if ph == "" {
			ph = NewPlaceholder()
		}
		vals[s.Name] = policy.SecretValue{Real: real, Placeholder: ph}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return pol.Bind(vals)
}

// NewPlaceholder makes a placeholder: "capsem-secret-" and 128 random bits
// in hex, which no real traffic holds by chance.
func NewPlaceholder() string {
	var b [16]byte
	rand.Read(b[:])
	return policy.PlaceholderPrefix + hex.EncodeToString(b[:])
}

func readSecret(s *policy.Secret, getenv func(string) (string, bool)) ([]byte, error) {
	if s.FromEnv != "" {
		v, ok := getenv(s.FromEnv)
		switch {
		case !ok:
			return nil, &MissingSecretError{s.Name, fmt.Sprintf("the host environment variable %s is not set; export it before starting capsem", s.FromEnv)}
		case strings.TrimSpace(v) == "":
			return nil, &MissingSecretError{s.Name, fmt.Sprintf("the host environment variable %s is empty; set it to the real value", s.FromEnv)}
		}
		return []byte(strings.TrimSpace(v)), nil
	}
	f, err := os.Open(s.FromFile)
	if err != nil {
		return nil, &MissingSecretError{s.Name, fmt.Sprintf("cannot read %s (%v); fix from_file", s.FromFile, err)}
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, maxSecretFileBytes)).ReadString('\n')
	if err != nil && err != io.EOF {
		return nil, &MissingSecretError{s.Name, fmt.Sprintf("cannot read %s: %v", s.FromFile, err)}
	}
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, &MissingSecretError{s.Name, fmt.Sprintf("the first line of %s is empty; put the real value there", s.FromFile)}
	}
	return []byte(line), nil
}
