//go:build !linux

package main

// evictPageCache does nothing where there is no posix_fadvise: the
// benchmark runs on Linux (network namespaces); this keeps the tree
// building for darwin.
func evictPageCache(string) error { return nil }
