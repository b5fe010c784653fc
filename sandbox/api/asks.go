package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/capsem/capsem/ask"
)

// ServeAsks adds PathAsks to mux for the questions of asks: GET lists the
// questions waiting (?follow=1: streams ask.Update lines, the listening
// line, then the waiting questions, then each asked and answered, until
// the client goes or done closes; an open stream is what makes the
// sandbox ask rather than deny), POST PathAsks/ID answers one. Handler
// serves it; capsem doctor serves it alone, over its own run's sandbox.
func ServeAsks(mux *http.ServeMux, asks *ask.Broker, done <-chan struct{}) {
	mux.HandleFunc("GET "+PathAsks, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") != "1" {
			writeJSON(w, http.StatusOK, asks.Pending())
			return
		}
		l := asks.Listen()
		defer l.Close()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		flusher, _ := w.(http.Flusher)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		// The first line says the sandbox asks this stream from now on.
		if enc.Encode(ask.Update{Type: ask.UpdateListening}) != nil {
			return
		}
		for {
			if flusher != nil {
				flusher.Flush()
			}
			select {
			case <-r.Context().Done():
				return
			case <-done:
				return
			case u, ok := <-l.Updates():
				if !ok {
					return // it fell behind: the client reconnects and sees what waits
				}
				if enc.Encode(u) != nil {
					return
				}
			}
		}
	})
	mux.HandleFunc("POST "+PathAsks+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		var a ask.Answer
		if err := json.NewDecoder(io.LimitReader(r.Body, maxRequestJSON)).Decode(&a); err != nil {
			WriteError(w, http.StatusBadRequest, `the body is not an answer ({"answer": "once" | "session" | "always" | "deny", "by": "cli" | "api" | "ui"})`)
			return
		}
		id := r.PathValue("id")
		if err := asks.Answer(id, a); err != nil {
			status := http.StatusConflict // the answer could not be kept: denied
			switch {
			case errors.Is(err, ask.ErrNoQuestion):
				status = http.StatusNotFound
			case !errors.Is(err, ask.ErrNotKept):
				status = http.StatusBadRequest
			}
			WriteError(w, status, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": id, "answer": a.Answer})
	})
}

// Asks is GET /v1/asks: the questions waiting.
func (c *Client) Asks(ctx context.Context) ([]ask.Question, error) {
	var qs []ask.Question
	err := c.do(ctx, http.MethodGet, PathAsks, nil, nil, &qs)
	return qs, err
}

// FollowAsks is GET /v1/asks?follow=1: fn gets each update, the questions
// waiting first, until ctx ends, the sandbox stops or fn fails. While it
// runs the sandbox asks rather than denies.
func (c *Client) FollowAsks(ctx context.Context, fn func(ask.Update) error) error {
	err := c.lines(ctx, PathAsks, url.Values{"follow": {"1"}}, 1<<20, func(line []byte) error {
		var u ask.Update
		if err := json.Unmarshal(line, &u); err != nil {
			return err
		}
		return fn(u)
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Answer is POST /v1/asks/ID.
func (c *Client) Answer(ctx context.Context, id string, a ask.Answer) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, PathAsks+"/"+url.PathEscape(id), nil, bytes.NewReader(body), nil)
}
