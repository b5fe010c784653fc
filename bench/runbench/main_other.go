//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "runbench: Linux only (the qemu backend)")
	os.Exit(2)
}
