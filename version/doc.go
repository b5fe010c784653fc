// Package version is capsem's version number, the one home of it: the
// binaries print it (with the commit a checkout build comes from), and the
// clients' packages restate it — sdk/python/capsem/__init__.py's
// __version__ and sdk/typescript/package.json's "version" — checked against
// it by tests/clients_version_test.go, so a client says which capsem it was
// made with.
//
// It must never import another capsem package: everything may import it.
package version
