package tests

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// pythonWithPytest is a Python that has pytest: Debian's (python3-pytest,
// which go tool task deps installs) before whatever python3 is first on
// PATH (a pyenv one often lacks it).
func pythonWithPytest() string {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-m", "pytest", "--version").Run() == nil {
			return py
		}
	}
	return ""
}

// The Python client (sdk/python) and its terminal-backend example, tested
// by their own pytest suite against real sandboxes started with the
// capsem built for these tests.
func TestPythonSDK(t *testing.T) {
	needGuest(t)
	py := pythonWithPytest()
	if py == "" {
		t.Skip("no python3 with pytest (apt-get install python3-pytest, or go tool task deps)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", "../sdk/python/tests")
	cmd.Env = append(os.Environ(), "CAPSEM_BIN="+capsemBin, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("pytest sdk/python/tests:\n%s", out)
	if err != nil {
		t.Fatalf("the Python client's tests failed: %v", err)
	}
}
