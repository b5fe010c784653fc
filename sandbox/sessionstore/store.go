package sessionstore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/otlp"
)

// Store is one session's own store and its writer.
type Store struct {
	Data string        // the data directory it belongs to
	St   *store.Store  // the session's own store
	W    *store.Writer // the session's writer: the Recorder its guest records to

	audit *otlp.Shipper // the stream to the team's collector (--audit-otlp); nil: none
	// auditRequired: an undelivered event at End is an error, not a warning.
	auditRequired bool
	Warn          func(string) // where End says what it could not deliver; nil: slog
}

// auditDrain bounds End's wait for the collector to take the session's
// last events: a run ends at most this much later when the collector is
// away; what it has not taken then is in the store (capsem export).
const auditDrain = 30 * time.Second

// StartAudit streams the session's events to the collector cfg names
// (cfg.URL "": none), resource attributes naming the session added.
func (r *Store) StartAudit(cfg otlp.Config) error {
	if cfg.URL == "" {
		return nil
	}
	sess, err := r.St.Session(r.W.ID())
	if err != nil {
		return err
	}
	cfg.Resource = otlp.ResourceOf(sess)
	if r.audit, err = otlp.Start(r.St, r.W, cfg); err != nil {
		return err
	}
	r.auditRequired = cfg.Required
	return nil
}

// Open makes the session's directory under data, opens its own store with
// the limits opt (zero: the store's defaults) and begins the session meta
// (its ID is made here).
func Open(data string, meta store.Session, opt store.Options) (*Store, error) {
	meta.ID = store.NewSessionID()
	if err := os.MkdirAll(home.SessionDir(data, meta.ID), 0o700); err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	st, err := store.OpenWith(home.SessionEventsDir(data, meta.ID), opt)
	if err != nil {
		return nil, err
	}
	w, err := st.Begin(meta)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Store{Data: data, St: st, W: w}, nil
}

// ID is the session's id.
func (r *Store) ID() string { return r.W.ID() }

// StoreCopy answers POST /v1/store/copy for a running sandbox's supervisor
// and a running capsem run alike: a checkpoint of the store (hard links)
// in a new directory under dir, taken after a sync so that every event
// appended so far is in it (the store commits in groups: without the sync
// a checkpoint missed the newest events). The reader opens it read-only
// and removes it.
func (r *Store) StoreCopy(dir string) (api.StoreCopy, error) {
	if err := r.W.Sync(); err != nil {
		return api.StoreCopy{}, fmt.Errorf("the store could not sync: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return api.StoreCopy{}, err
	}
	snap := filepath.Join(dir, fmt.Sprintf("%d", time.Now().UnixNano()))
	if err := r.St.Checkpoint(snap); err != nil {
		return api.StoreCopy{}, fmt.Errorf("checkpoint of the store: %w", err)
	}
	return api.StoreCopy{Dir: snap, SessionID: r.W.ID()}, nil
}

// End records the exit code (nil: none, the session failed), flushes
// every event and closes the store.
func (r *Store) End(code *int) error {
	var auditErr error
	if r.audit != nil {
		if _, err := r.audit.Close(auditDrain); err != nil {
			if r.auditRequired {
				auditErr = err
			} else if r.Warn != nil {
				r.Warn(err.Error())
			} else {
				slog.Warn(err.Error())
			}
		}
	}
	return errors.Join(auditErr, r.W.End(code), r.St.Close())
}
