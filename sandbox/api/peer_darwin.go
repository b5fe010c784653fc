package api

import "golang.org/x/sys/unix"

// fdPeerUID is the effective uid of the process at fd's other end
// (LOCAL_PEERCRED, what getpeereid(3) reads).
func fdPeerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}
