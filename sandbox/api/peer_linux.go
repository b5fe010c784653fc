package api

import "golang.org/x/sys/unix"

// fdPeerUID is the effective uid of the process that created the socket at
// fd's other end (SO_PEERCRED, taken at listen and kept by the kernel).
func fdPeerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}
