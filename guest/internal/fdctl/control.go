package fdctl

import "os"

// Control runs fn with f's descriptor, which stays in the mode it is in,
// and returns fn's error, or the error of reaching the descriptor.
func Control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
