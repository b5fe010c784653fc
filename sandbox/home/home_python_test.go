package home

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

// pythonHome is the Python client's restatement of this package's rules.
const pythonHome = "../../sdk/python/capsem/home.py"

// pythonCase is one question to the Python client's home module: in the
// environment env (an empty value unsets), what are the data directory
// ("" data: its default), the socket of sandbox name and the fallback
// directory, and is the sandbox locked.
type pythonCase struct {
	Env  map[string]string
	Data string
	Name string
}

type pythonAnswer struct {
	Data, Socket, Fallback string
	Locked                 bool
}

// pythonSays asks the Python client's home module every case, in one
// python3 (its start is most of the time this takes), loading home.py
// alone as the client does through its package.
func pythonSays(t *testing.T, cases ...pythonCase) []pythonAnswer {
	t.Helper()
	script := `import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("home", sys.argv[1])
home = importlib.util.module_from_spec(spec)
spec.loader.exec_module(home)
out = []
for c in json.load(sys.stdin):
    for k, v in (c["Env"] or {}).items():
        if v:
            os.environ[k] = v
        else:
            os.environ.pop(k, None)
    data = c["Data"] or home.default_data_dir()
    out.append({"Data": data, "Socket": home.socket_path(data, c["Name"]),
                "Fallback": home.fallback_socket_dir(), "Locked": home.locked(data, c["Name"])})
print(json.dumps(out))`
	in, _ := json.Marshal(cases)
	cmd := exec.Command("python3", "-c", script, pythonHome)
	cmd.Stdin = strings.NewReader(string(in))
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 %s: %v", pythonHome, err)
	}
	var out []pythonAnswer
	if err := json.Unmarshal(b, &out); err != nil || len(out) != len(cases) {
		t.Fatalf("python3 %s: %q: %v", pythonHome, b, err)
	}
	return out
}

// The Python client finds a sandbox's socket without capsem ls, by this
// package's rules restated in Python: the two must agree on the default
// data directory, the socket path and its fallback, in every environment
// that changes them.
func TestPythonClientAgreesOnTheHome(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	tmp := t.TempDir()
	deep := filepath.Join(tmp, strings.Repeat("long-directory-name/", 5))
	table := []struct {
		env  map[string]string // "" unsets
		data string
		name string
		why  string
	}{
		{map[string]string{"XDG_DATA_HOME": "", "HOME": "/home/u"}, "", "dev", "the default data directory under HOME"},
		{map[string]string{"XDG_DATA_HOME": tmp + "/xdg/", "HOME": "/home/u"}, "", "dev", "XDG_DATA_HOME wins, its trailing slash cleaned"},
		{map[string]string{"XDG_DATA_HOME": "", "HOME": ""}, "", "dev", "no home at all: .capsem"},
		{nil, tmp, "dev", "a short path: api.sock in the sandbox's directory"},
		{nil, tmp + "//a/../b/", "dev", "a path Go cleans"},
		{map[string]string{"XDG_RUNTIME_DIR": tmp + "/run"}, deep, "dev", "too long: under XDG_RUNTIME_DIR"},
		{map[string]string{"XDG_RUNTIME_DIR": "", "TMPDIR": ""}, deep, "dev", "too long, no XDG_RUNTIME_DIR: /tmp/capsem-UID"},
		{map[string]string{"XDG_RUNTIME_DIR": "", "TMPDIR": tmp + "/t/"}, deep, "dev", "too long, TMPDIR: there"},
		{map[string]string{"XDG_RUNTIME_DIR": tmp}, deep, strings.Repeat("n", 63), "a name cut at 40 in the fallback"},
		{map[string]string{"XDG_RUNTIME_DIR": tmp}, "rel/" + strings.Repeat("r", 100), "dev", "a relative data directory, hashed as absolute"},
	}
	var cases []pythonCase
	for _, c := range table {
		cases = append(cases, pythonCase{Env: c.env, Data: c.data, Name: c.name})
	}
	answers := pythonSays(t, cases...)
	for i, c := range table {
		// The same environment, in order, for Go.
		for k, v := range c.env {
			t.Setenv(k, v)
			if v == "" {
				os.Unsetenv(k)
			}
		}
		data := c.data
		if data == "" {
			data = store.DefaultDir()
		}
		got, want := answers[i], New(data, c.name)
		if got.Data != data || got.Socket != want.SocketPath() || got.Fallback != FallbackSocketDir() {
			t.Errorf("%s:\n python data %s socket %s fallback %s\n go     data %s socket %s fallback %s",
				c.why, got.Data, got.Socket, got.Fallback, data, want.SocketPath(), FallbackSocketDir())
		}
	}
}

// The Python client tells a running sandbox by the same lock, and checks
// a name by the same rule before it becomes a path.
func TestPythonClientAgreesOnTheLockAndTheName(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	data := t.TempDir()
	d := New(data, "dev")
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	locked := func() bool { return pythonSays(t, pythonCase{Data: data, Name: "dev"})[0].Locked }
	if locked() {
		t.Error("python: locked with no supervisor")
	}
	f, err := d.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if !locked() {
		t.Error("python: not locked while the lock is held")
	}
	f.Close()
	if locked() {
		t.Error("python: locked after the lock was given back")
	}

	src, err := os.ReadFile(pythonHome)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		re   string
		want string
		why  string
	}{
		{`(?m)^NAME_RULE = re\.compile\(r"(.*)"\)$`, NameRule.String(), "the sandbox name rule"},
		{`(?m)^MAX_SOCKET_PATH = (\d+)$`, strconv.Itoa(MaxSocketPath), "the longest socket path"},
	} {
		m := regexp.MustCompile(c.re).FindSubmatch(src)
		if m == nil || string(m[1]) != c.want {
			t.Errorf("%s: %s has %q, sandbox/home %q", c.why, pythonHome, m, c.want)
		}
	}
}
