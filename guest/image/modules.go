package image

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// maxModule bounds one kernel module (the largest in Debian 6.1, amdgpu,
// is ~20 MB).
const maxModule = 128 << 20

// ModuleName normalises a module or file name the way the kernel does:
// no directory, no .ko[.xz|.zst|.gz], dashes as underscores.
func ModuleName(s string) string {
	s = path.Base(s)
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		s = strings.TrimSuffix(s, ext)
	}
	s = strings.TrimSuffix(s, ".ko")
	return strings.ReplaceAll(s, "-", "_")
}

// modInfo is what the kernel module's .modinfo section says about it.
type modInfo struct {
	name    string
	depends []string
	softPre []string // softdep "pre:" names: module names or aliases
	aliases []string
}

// parseModinfo reads a module's name and dependencies from its .modinfo
// section (NUL-separated key=value strings).
func parseModinfo(ko []byte) (modInfo, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return modInfo{}, fmt.Errorf("not an ELF module: %w", err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return modInfo{}, fmt.Errorf("no .modinfo section")
	}
	b, err := s.Data()
	if err != nil {
		return modInfo{}, err
	}
	var mi modInfo
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			mi.name = ModuleName(v)
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" {
					mi.depends = append(mi.depends, ModuleName(d))
				}
			}
		case "softdep":
			// "pre: a b post: c": modprobe loads a and b first. The guest
			// has no modprobe, so they go into the load order.
			pre := false
			for _, w := range strings.Fields(v) {
				switch w {
				case "pre:":
					pre = true
				case "post:":
					pre = false
				default:
					if pre {
						mi.softPre = append(mi.softPre, w)
					}
				}
			}
		case "alias":
			mi.aliases = append(mi.aliases, v)
		}
	}
	if mi.name == "" {
		return modInfo{}, fmt.Errorf(".modinfo has no name")
	}
	return mi, nil
}

// decompressModule returns a module's ELF bytes: finit_module wants an
// uncompressed file unless the guest kernel decompresses (and ours need
// not), so .ko.xz, .ko.zst and .ko.gz are unpacked here.
func decompressModule(name string, data []byte) ([]byte, error) {
	switch {
	case strings.HasSuffix(name, ".ko"):
		return data, nil
	case strings.HasSuffix(name, ".ko.xz"):
		return decodeXZ(data, maxModule)
	case strings.HasSuffix(name, ".ko.zst"):
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxModule))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.DecodeAll(data, nil)
	case strings.HasSuffix(name, ".ko.gz"):
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		return readAllLimited(zr, maxModule)
	}
	return nil, fmt.Errorf("%s: not a kernel module file", name)
}

// isModuleFile reports whether a package path is a kernel module.
func isModuleFile(p string) bool {
	for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

// parseBuiltin reads modules.builtin ("kernel/fs/ext4/ext4.ko" per line)
// into a set of module names.
func parseBuiltin(r io.Reader) (map[string]bool, error) {
	set := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			set[ModuleName(l)] = true
		}
	}
	return set, sc.Err()
}

// loadOrder returns the modules to load for want, dependencies first: a
// depth-first walk of each wanted module's soft ("pre:") and hard
// dependencies, in the order want names them (dependencies in sorted
// order), each module once. Modules built into the kernel are skipped; a
// module neither available nor built in is an error.
func loadOrder(want []string, mods map[string]modInfo, builtin map[string]bool) ([]string, error) {
	aliases := map[string][]string{}
	for n, mi := range mods {
		for _, a := range mi.aliases {
			aliases[a] = append(aliases[a], n)
		}
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string, from string) error
	visit = func(n, from string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("module dependency cycle through %s", n)
		case 2:
			return nil
		}
		mi, ok := mods[n]
		if !ok {
			if builtin[n] {
				state[n] = 2
				return nil
			}
			if from != "" {
				return fmt.Errorf("module %s (needed by %s) is not in the kernel package", n, from)
			}
			return fmt.Errorf("module %s is not in the kernel package", n)
		}
		state[n] = 1
		deps := append([]string(nil), mi.depends...)
		for _, sd := range mi.softPre {
			r, ok := resolveSoftdep(sd, mods, builtin, aliases)
			if !ok {
				return fmt.Errorf("module %s wants %s loaded first, and no module provides it", n, sd)
			}
			if r != "" {
				deps = append(deps, r)
			}
		}
		sort.Strings(deps)
		deps = slices.Compact(deps)
		for _, d := range deps {
			if err := visit(d, n); err != nil {
				return err
			}
		}
		state[n] = 2
		order = append(order, n)
		return nil
	}
	for _, w := range want {
		if err := visit(ModuleName(w), ""); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// resolveSoftdep maps a softdep name to the module to load: the module of
// that name, or the one whose alias it is — the portable "_generic"
// implementation when there are several (crc32c: crc32c_generic, not
// crc32c_intel, which needs SSE4.2). "" with ok: built in, nothing to load.
func resolveSoftdep(name string, mods map[string]modInfo, builtin map[string]bool, aliases map[string][]string) (string, bool) {
	n := ModuleName(name)
	if _, ok := mods[n]; ok {
		return n, true
	}
	if builtin[n] {
		return "", true
	}
	cands := append([]string(nil), aliases[name]...)
	if len(cands) == 0 {
		return "", false
	}
	sort.Slice(cands, func(i, j int) bool {
		gi, gj := strings.HasSuffix(cands[i], "_generic"), strings.HasSuffix(cands[j], "_generic")
		if gi != gj {
			return gi
		}
		return cands[i] < cands[j]
	})
	return cands[0], true
}
