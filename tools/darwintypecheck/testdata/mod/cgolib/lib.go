// Package cgolib is a cgo package: its C is not checked, and Count leaks
// a C type through its API.
package cgolib

// #include <stdint.h>
// static int count(void) { return 1; }
import "C"

func Count() C.int { return C.count() }

func Name() string { return C.GoString(nil) + "cgolib" }
