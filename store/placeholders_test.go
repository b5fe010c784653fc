package store

import (
	"reflect"
	"testing"
)

// The session's record keeps the placeholders noted at Begin and at each
// reload, without repeats or empty ones, across a reopen of the store.
func TestSessionPlaceholders(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Begin(Session{ID: "s1", Placeholders: []Placeholder{{"B", "fixed-placeholder-b1"}, {"A", "fixed-placeholder-a1"}, {"A", "fixed-placeholder-a1"}}})
	if err != nil {
		t.Fatal(err)
	}
	// A reload: A keeps its placeholder, B's is changed, C is new, D has
	// none (an unbound policy).
	w.NotePlaceholders(map[string]string{"A": "fixed-placeholder-a1", "B": "fixed-placeholder-b2", "C": "fixed-placeholder-c1", "D": ""})
	w.Append(Event{DNS: &DNS{QName: "x.test"}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Session("s1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Placeholder{{"A", "fixed-placeholder-a1"}, {"B", "fixed-placeholder-b1"}, {"B", "fixed-placeholder-b2"}, {"C", "fixed-placeholder-c1"}}
	if !reflect.DeepEqual(got.Placeholders, want) {
		t.Errorf("Placeholders = %+v, want %+v", got.Placeholders, want)
	}
}
