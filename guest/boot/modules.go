package boot

import (
	"fmt"
	"path"
	"strings"
)

// Module is one entry of the module list: a .ko file and its parameters.
type Module struct {
	Path   string // absolute
	Params string // "key=value key2=value2", as finit_module takes them
}

// Name is the module's name: its file name without .ko and a compression
// suffix.
func (m Module) Name() string {
	b := path.Base(m.Path)
	for _, s := range []string{".xz", ".zst", ".gz"} {
		b = strings.TrimSuffix(b, s)
	}
	return strings.TrimSuffix(b, ".ko")
}

// Compressed reports whether the kernel must decompress the file
// (finit_module's MODULE_INIT_COMPRESSED_FILE).
func (m Module) Compressed() bool {
	return strings.HasSuffix(m.Path, ".xz") || strings.HasSuffix(m.Path, ".zst") || strings.HasSuffix(m.Path, ".gz")
}

// ParseModuleList reads a module list (capsem.order in the initramfs): module
// files in load order (dependencies first), separated by spaces or newlines,
// paths relative to dir unless absolute; a word with "=" is a parameter of
// the module before it; "#" comments to the end of the line.
func ParseModuleList(data []byte, dir string) ([]Module, error) {
	var mods []Module
	for n, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, w := range strings.Fields(line) {
			if strings.Contains(w, "=") {
				if len(mods) == 0 {
					return nil, fmt.Errorf("module list line %d: parameter %q before any module", n+1, w)
				}
				m := &mods[len(mods)-1]
				m.Params = strings.TrimSpace(m.Params + " " + w)
				continue
			}
			if !strings.Contains(w, ".ko") {
				return nil, fmt.Errorf("module list line %d: %q is not a .ko file", n+1, w)
			}
			p := w
			if !path.IsAbs(p) {
				p = path.Join(dir, p)
			}
			mods = append(mods, Module{Path: path.Clean(p)})
		}
	}
	return mods, nil
}
