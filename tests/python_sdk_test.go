package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// debianPython is the Python the client's package is installed with:
// Debian's, which has what installing and testing it offline need
// (python3-venv, flit's flit_core, python3-pytest; go tool task deps
// installs them). A pyenv python3 first on PATH often lacks them.
const debianPython = "/usr/bin/python3"

// sdkVenv installs sdk/python into a fresh venv, as a user would (pip
// install ./sdk/python), building it with Debian's flit_core and
// downloading nothing; it returns the venv's python. The venv sees the
// system's packages only for pytest: the capsem it imports is the one pip
// installed, which test_installed.py checks.
func sdkVenv(t *testing.T) (python, venv string) {
	t.Helper()
	for _, m := range []string{"venv", "pytest", "flit_core"} {
		if exec.Command(debianPython, "-c", "import "+m).Run() != nil {
			t.Skipf("%s has no %s (apt-get install python3-venv python3-pytest flit, or go tool task deps)", debianPython, m)
		}
	}
	venv = filepath.Join(t.TempDir(), "venv")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run(debianPython, "-m", "venv", "--system-site-packages", venv)
	python = filepath.Join(venv, "bin", "python")
	run(python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", "../sdk/python")
	return python, venv
}

// The Python client (sdk/python), installed into a venv with pip, and its
// tests run from there against real sandboxes started with the capsem
// built for these tests: the client, its asyncio twin, the hermes-agent
// backend and the terminal-backend example.
func TestPythonSDK(t *testing.T) {
	needGuest(t)
	py, venv := sdkVenv(t)
	tests, err := filepath.Abs("../sdk/python/tests")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", tests)
	cmd.Dir = t.TempDir() // not sdk/python: python -m puts the working directory on sys.path
	cmd.Env = append(os.Environ(), "CAPSEM_BIN="+capsemBin, "CAPSEM_SDK_VENV="+venv, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("pytest sdk/python/tests:\n%s", out)
	if err != nil {
		t.Fatalf("the Python client's tests failed: %v", err)
	}
}

// The package's type hints hold under mypy --strict (Debian's mypy): a
// typed client is what py.typed promises its users.
func TestPythonSDKTypes(t *testing.T) {
	mypy, err := exec.LookPath("mypy")
	if err != nil {
		t.Skip("no mypy (apt-get install mypy, or go tool task deps)")
	}
	cmd := exec.Command(mypy, "--strict", "--cache-dir=/dev/null", "capsem")
	cmd.Dir = "../sdk/python"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mypy --strict sdk/python/capsem: %v\n%s", err, out)
	}
}
