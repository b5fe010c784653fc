// Command kernelpin prints the guest kernel capsem pins
// (guest/image.DefaultKernel) as apt names it, package=version, so that the
// Taskfile's deps task checks the apt lists for the kernel the code fetches
// rather than for a copy of its name:
//
//	go run ./tools/kernelpin    # prints package=version
//
// What it must never do: print anything but that one line on success, or
// take the pin from anywhere but image.DefaultKernel.
package main
