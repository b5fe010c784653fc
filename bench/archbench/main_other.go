//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "archbench: Linux only (the qemu backend and the image build)")
	os.Exit(2)
}
