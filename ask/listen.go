package ask

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// listenerBuffer is how many updates a listener may fall behind by before
// it is dropped: a person's terminal reads each at once; MaxPending asks
// and their answers fit four times over.
const listenerBuffer = 4 * 2 * MaxPending

// Listener receives the updates of a Broker: while one is open, questions
// are asked (with none, Ask denies at once).
type Listener struct {
	b  *Broker
	ch chan Update
}

// Listen opens a listener. Its first updates are the questions waiting
// now ("asked"), then each question asked and answered, until Close or
// until it falls listenerBuffer updates behind (the channel is closed).
func (b *Broker) Listen() *Listener {
	l := &Listener{b: b, ch: make(chan Update, listenerBuffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range b.pendingLocked() {
		l.ch <- Update{Type: UpdateAsked, Question: q}
	}
	b.listeners[l] = struct{}{}
	return l
}

// Updates is the listener's stream; it is closed by Close and when the
// listener fell behind.
func (l *Listener) Updates() <-chan Update { return l.ch }

// Close stops the listener.
func (l *Listener) Close() {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if _, ok := l.b.listeners[l]; ok {
		delete(l.b.listeners, l)
		close(l.ch)
	}
}

// Listening reports how many listeners are open.
func (b *Broker) Listening() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.listeners)
}

func (b *Broker) broadcastLocked(u Update) {
	for l := range b.listeners {
		select {
		case l.ch <- u:
		default:
			delete(b.listeners, l)
			close(l.ch)
		}
	}
}

// sortQuestions orders questions as they were asked (IDs count up).
func sortQuestions(qs []Question) {
	slices.SortFunc(qs, func(a, b Question) int {
		na, _ := strconv.ParseUint(strings.TrimPrefix(a.ID, "q"), 10, 64)
		nb, _ := strconv.ParseUint(strings.TrimPrefix(b.ID, "q"), 10, 64)
		return cmp.Compare(na, nb)
	})
}
