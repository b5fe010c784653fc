package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/ask"
)

// TestAsksAPI drives a broker through the handler: a followed stream
// makes the broker ask, the question arrives on it, an answer posted to
// its ID reaches the asker, and the errors say what went wrong.
func TestAsksAPI(t *testing.T) {
	b := &silentBackend{asks: ask.New(ask.Config{})}
	srv := httptest.NewServer(Handler(b))
	defer srv.Close()

	if out := b.asks.Ask(context.Background(), ask.Network("a.test", 0), time.Minute); out.Reason != ask.ReasonUnanswered {
		t.Fatalf("no stream open: %+v", out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+PathAsks+"?follow=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for b.asks.Listening() == 0 {
		time.Sleep(time.Millisecond)
	}
	done := make(chan ask.Outcome, 1)
	go func() { done <- b.asks.Ask(context.Background(), ask.Network("b.test", 8080), time.Minute) }()
	if !lines.Scan() || lines.Text() != `{"type":"listening"}` {
		t.Fatalf("the stream's first line: %q, want the listening line", lines.Text())
	}
	if !lines.Scan() {
		t.Fatal("the stream ended")
	}
	var u ask.Update
	if err := json.Unmarshal(lines.Bytes(), &u); err != nil || u.Type != "asked" || u.Question.Entry != "b.test:8080" {
		t.Fatalf("%s: %v", lines.Bytes(), err)
	}
	var pending []ask.Question
	r, err := http.Get(srv.URL + PathAsks)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(r.Body).Decode(&pending)
	r.Body.Close()
	if len(pending) != 1 || pending[0].ID != u.Question.ID {
		t.Errorf("GET %s: %+v", PathAsks, pending)
	}
	post := func(id, body string) (int, string) {
		r, err := http.Post(srv.URL+PathAsks+"/"+id, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var eb ErrorBody
		_ = json.NewDecoder(r.Body).Decode(&eb)
		return r.StatusCode, eb.Error
	}
	tests := []struct {
		id, body string
		status   int
		errSub   string
		why      string
	}{
		{u.Question.ID, `not json`, 400, "the body is not an answer", "a body that is not JSON"},
		{u.Question.ID, `{"answer":"maybe"}`, 400, `write "once"`, "an answer that is none of the four"},
		{u.Question.ID, `{"answer":"session","by":"api"}`, 409, "keeps no session answers", "a session answer this broker cannot keep denies"},
		{u.Question.ID, `{"answer":"once"}`, 404, "no such question", "the question was denied above"},
	}
	for _, tc := range tests {
		status, msg := post(tc.id, tc.body)
		if status != tc.status || !strings.Contains(msg, tc.errSub) {
			t.Errorf("%s: %d %q, want %d with %q", tc.why, status, msg, tc.status, tc.errSub)
		}
	}
	if out := <-done; out.Allowed || out.Reason != ask.ReasonDenied || out.By != ask.ByAPI {
		t.Errorf("outcome %+v", out)
	}
	go func() { done <- b.asks.Ask(context.Background(), ask.Network("c.test", 0), time.Minute) }()
	var id string
	for lines.Scan() {
		_ = json.Unmarshal(lines.Bytes(), &u)
		if u.Type == "asked" {
			id = u.Question.ID
			break
		}
	}
	if status, msg := post(id, `{"answer":"once","by":"ui"}`); status != 200 {
		t.Fatalf("answer: %d %s", status, msg)
	}
	if out := <-done; !out.Allowed || out.Answer != ask.Once || out.By != ask.ByUI {
		t.Errorf("outcome %+v", out)
	}
}
