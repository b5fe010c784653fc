package learn

import (
	"regexp"
	"slices"
	"strings"
)

// tableHeader is a line that starts a table: "[name]" or "[[name]]".
var tableHeader = regexp.MustCompile(`^\s*\[\[?\s*([A-Za-z0-9_.\-" ]+?)\s*\]\]?\s*(#.*)?$`)

// learned are the tables Suggest writes itself; a base policy's are left
// out of its copy.
var learned = []string{"network", "http", "mcp", "mcp.rules", "secret"}

// baseTables is the text of a base policy file without the tables
// Suggest writes: its [upstream], [mcp.servers.NAME], [dlp], [[forward]]
// and the rest, as the file writes them. (A table written
// inline, or as dotted keys of a learned table, is left out with it.)
func baseTables(text string) string {
	var out []string
	skip := false
	for _, line := range strings.Split(text, "\n") {
		if m := tableHeader.FindStringSubmatch(line); m != nil {
			name := strings.ReplaceAll(strings.ReplaceAll(m[1], `"`, ""), " ", "")
			skip = slices.Contains(learned, name)
		}
		if !skip {
			out = append(out, line)
		}
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
