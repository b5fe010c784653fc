package sqliteexport_test

import (
	"github.com/capsem/capsem/store/sqliteexport"
	"github.com/capsem/capsem/ui"
)

// A Reader is a source of the session viewer: an exported file can be
// shown as a store is.
var _ ui.Source = (*sqliteexport.Reader)(nil)
