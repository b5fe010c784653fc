package agent

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// maxHolders bounds Holders' list (it goes into one frame), and
// maxHolderFDs the descriptors named for one process.
const (
	maxHolders   = 64
	maxHolderFDs = 4
)

// Holders lists the processes that hold something under dir, which is
// what keeps its filesystem from being unmounted (EBUSY): a working
// directory (cwd), a root (root), an open file or directory (fd N) or a
// mapped file (maps). They are found in procDir (/proc), one entry a
// process, by pid: "1234 bash (cwd)", "99 python3 (fd 3, fd 4)". The
// process self is left out: the agent, which let go of its own (the
// watcher's) before asking. Processes it may not look into are skipped.
func Holders(procDir, dir string, self int) []string {
	dir = filepath.Clean(dir)
	under := func(p string) bool {
		p = strings.TrimSuffix(p, " (deleted)")
		return p == dir || strings.HasPrefix(p, dir+"/")
	}
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	var out []string
	more := 0
	for _, pid := range pids {
		base := filepath.Join(procDir, strconv.Itoa(pid))
		var why []string
		for _, l := range []string{"cwd", "root"} {
			if p, err := os.Readlink(filepath.Join(base, l)); err == nil && under(p) {
				why = append(why, l)
			}
		}
		if fds, err := os.ReadDir(filepath.Join(base, "fd")); err == nil {
			sort.Slice(fds, func(i, j int) bool { return atoi(fds[i].Name()) < atoi(fds[j].Name()) })
			n := 0
			for _, fd := range fds {
				if p, err := os.Readlink(filepath.Join(base, "fd", fd.Name())); err == nil && under(p) {
					if n < maxHolderFDs {
						why = append(why, "fd "+fd.Name())
					}
					n++
				}
			}
			if n > maxHolderFDs {
				why = append(why, fmt.Sprintf("%d more fds", n-maxHolderFDs))
			}
		}
		if mapsUnder(filepath.Join(base, "maps"), under) {
			why = append(why, "maps")
		}
		if len(why) == 0 {
			continue
		}
		if len(out) == maxHolders {
			more++
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(base, "comm"))
		name := strings.TrimSpace(string(comm))
		if name == "" {
			name = "?"
		}
		out = append(out, fmt.Sprintf("%d %s (%s)", pid, name, strings.Join(why, ", ")))
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more processes", more))
	}
	return out
}

// mapsUnder says whether a mapping in the maps file names a file under.
func mapsUnder(path string, under func(string) bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		// address perms offset dev inode path: the path is all after
		// the first " /" (it may hold spaces; the fields before never
		// hold a slash).
		if i := strings.Index(sc.Text(), " /"); i >= 0 && under(sc.Text()[i+1:]) {
			return true
		}
	}
	return false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
