// Command darwintypecheck type-checks Go packages as they would be built
// for another GOOS and GOARCH with cgo on, without a C toolchain: the vz
// backend (hypervisor/vz with -tags vz) builds only on macOS with cgo and
// the macOS SDK, which a Linux machine lacks, so `go build` and `go vet`
// cannot look at its framework files here. The Taskfile's lint task runs
//
//	go run ./tools/darwintypecheck -goos darwin -goarch arm64,amd64 -tags vz ./hypervisor/vz
//
// (arm64 for Apple silicon, amd64 for the Intel Macs' build: the
// framework binding's API differs between them).
//
// How: `go list -deps -test` with the target's GOOS, GOARCH, CGO_ENABLED=1
// and the tags picks every file the real build would compile, then
// go/types checks all the packages from source, dependencies first
// (their function bodies skipped: only their API matters), the named
// packages and their tests in full. A cgo package (`import "C"`: the
// framework binding github.com/Code-Hex/vz/v3, runtime/cgo) is checked
// with types.Config.FakeImportC: `C` is an empty package and every
// expression that involves a C name has no type, so nothing C is checked
// — running cgo would need the C compiler and the SDK's headers
// (Foundation, Virtualization) to learn those types.
//
// What makes it a real check of the named packages: they do not import
// C, and any expression in them whose type involves a type the checker
// could not know (a C type leaking through a dependency's API) is an
// error here, not silence; so every expression in them has been checked.
// What it does not check: the bodies of the dependencies (the binding's
// own code is only compiled on a Mac), what the C code does, and
// anything only the linker or the macOS SDK would see (missing symbols,
// availability): a Mac build is the final word.
//
// What it must never do: pass when the type checker reported an error,
// or when an expression of a named package went unchecked. The test
// (main_test.go) proves that a deliberate type error fails it.
package main
