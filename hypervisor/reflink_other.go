//go:build unix && !linux

package hypervisor

import (
	"errors"
	"os"
)

// reflink is not tried here: the copy is sparse.
func reflink(out, in *os.File) error { return errors.ErrUnsupported }
