// Package listflag reads the benchmarks' comma-separated list flags (-paths,
// -skip, -dl-protos …) alike: items trimmed of spaces, empty items dropped.
//
// It never validates an item against what a flag accepts: the bench that
// owns the flag does, and says which values it wants.
package listflag
