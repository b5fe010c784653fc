package storeview

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/capsem/capsem/sandbox/sessionstore"
	"github.com/capsem/capsem/store"
)

// mainStore is the data directory's main store, opened read-only when a
// read needs it and, with idle above 0, closed once no read has for idle.
type mainStore struct {
	data string
	idle time.Duration // 0: never closed before close

	mu    sync.Mutex
	st    *store.Store
	refs  int
	timer *time.Timer
}

func (m *mainStore) acquire() (*store.Store, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	if m.st == nil {
		st, err := sessionstore.OpenReadOnlyWait(m.data, mainStoreWait)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, m.noneEnded()
		}
		if err != nil {
			return nil, err
		}
		m.st = st
	}
	m.refs++
	return m.st, nil
}

func (m *mainStore) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs--
	if m.refs == 0 && m.idle > 0 {
		m.timer = time.AfterFunc(m.idle, m.closeIdle)
	}
}

// held is the store while it is open, else nil.
func (m *mainStore) held() *store.Store {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// mergeIfClosed moves the finished sessions in, unless this process holds
// the store.
func (m *mainStore) mergeIfClosed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		_, _ = sessionstore.Merge(m.data, 0)
	}
}

func (m *mainStore) closeIdle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refs == 0 && m.st != nil {
		m.st.Close()
		m.st = nil
	}
}

func (m *mainStore) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Stop()
	}
	if m.st != nil {
		m.st.Close()
		m.st = nil
	}
}

func (m *mainStore) noneEnded() error {
	return fmt.Errorf("no session has ended in %s yet (its event store is made when the first one ends): %w", m.data, store.ErrNotFound)
}
