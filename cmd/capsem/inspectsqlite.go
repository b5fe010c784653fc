package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/sqliteexport"
)

// inspectSQLite is capsem inspect of a file capsem export wrote, perhaps
// one someone sent: it is opened as capsem ui --sqlite opens it
// (sqliteexport.OpenReader: only an export of this build's schema, read
// within bounds), the session id (the newest of the file's sessions
// without one) is summarised from its record, and the same checks run on
// the file.
func inspectSQLite(c *cli.Context, file, id string, n int) error {
	r, err := sqliteexport.OpenReader(file)
	if err != nil {
		return fmt.Errorf("--sqlite: %w", err)
	}
	defer r.Close()
	var sess store.Session
	if id == "" {
		list, err := r.Sessions()
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return fmt.Errorf("%s: no sessions in it", display(file))
		}
		sess = list[0]
	} else if sess, err = r.Session(id); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s: no session %s in it", display(file), display(id))
	} else if err != nil {
		return err
	}
	res, err := sqliteexport.VerifyChain(context.Background(), r, sess.ID)
	if err != nil {
		return err
	}
	chain, err := chainCheck(c, res.Status, res.Scrubbed, res.Err)
	if err != nil {
		return err
	}
	return reportAndCheck(c, r, summarize(sess), n, chain)
}
