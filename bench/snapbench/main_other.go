//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "snapbench: the default guest runs under QEMU on Linux only")
	os.Exit(1)
}
