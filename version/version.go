package version

import "runtime/debug"

// Number is capsem's version. A release sets it; the clients' packages carry
// the same number.
const Number = "0.1.0"

// String is Number, and for a build from a checkout the commit it was built
// from ("0.1.0 4f2a9c1e03bd"), with "+dirty" for uncommitted changes: a
// snapshot records it, and a restore by another build is refused. A build
// of a tagged module (go install …@vX) gives the module's version instead.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Number
	}
	if v := bi.Main.Version; v != "(devel)" && v != "" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev == "" {
		return Number
	}
	return Number + " " + rev + dirty
}
