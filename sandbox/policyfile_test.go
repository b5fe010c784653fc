package sandbox

import (
	"errors"
	"path/filepath"
	"testing"
)

// Whatever the user got wrong in a policy or its secrets is a ConfigError
// (the CLI's exit 2), and the default policy always loads.
func TestLoadBoundPolicyErrorsAreTheUsers(t *testing.T) {
	t.Setenv("CAPSEM_TEST_SECRET", "")
	for _, c := range []struct {
		path  string
		flags []string
		ok    bool
		why   string
	}{
		{"", nil, true, "the default policy"},
		{filepath.Join(t.TempDir(), "absent.toml"), nil, false, "a policy file that is not there"},
		{"", []string{"=bad"}, false, "a --secret that names nothing"},
		{"", []string{"CAPSEM_TEST_SECRET@example.com"}, false, "a secret with no real value in the environment"},
	} {
		_, err := LoadBoundPolicy(c.path, c.flags, nil)
		var ce *ConfigError
		if c.ok != (err == nil) || (err != nil && !errors.As(err, &ce)) {
			t.Errorf("%s: %v (a ConfigError wanted: %v)", c.why, err, !c.ok)
		}
	}
}
