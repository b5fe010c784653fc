package tests

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/capsem/capsem/version"
)

// The clients' packages carry capsem's version (version.Number, its one
// home), so that an installed client says which capsem it was made with.
func TestClientsVersion(t *testing.T) {
	src, err := os.ReadFile("../sdk/python/capsem/__init__.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^__version__ = "([^"]*)"$`).FindSubmatch(src)
	if m == nil {
		t.Fatal(`sdk/python/capsem/__init__.py has no __version__ = "…" line (flit reads the package's version from it)`)
	}
	if string(m[1]) != version.Number {
		t.Errorf("sdk/python's __version__ is %q, capsem's version.Number %q: make them the same", m[1], version.Number)
	}

	raw, err := os.ReadFile("../sdk/typescript/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatalf("sdk/typescript/package.json: %v", err)
	}
	if pkg.Version != version.Number {
		t.Errorf("sdk/typescript/package.json's version is %q, capsem's version.Number %q: make them the same", pkg.Version, version.Number)
	}
}
