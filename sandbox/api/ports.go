package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/capsem/capsem/ports"
)

// PortRequest is POST /v1/ports' body.
type PortRequest struct {
	// Spec is [HOSTIP:]HOSTPORT:GUESTPORT[/tcp]; HOSTIP 127.0.0.1 unless
	// given, HOSTPORT 0 for a free one.
	Spec string `json:"spec"`
}

// Port is a published port: GET /v1/ports' items, POST's answer.
type Port struct {
	Spec      string `json:"spec"`      // in force, in full: HOSTIP:HOSTPORT:GUESTPORT/tcp (for a stopped sandbox: as published)
	HostIP    string `json:"host_ip"`   // the host address listened on
	HostPort  int    `json:"host_port"` // the host port (0 for a stopped sandbox's free-port spec)
	GuestPort int    `json:"guest_port"`
	Protocol  string `json:"protocol"` // tcp
	// Published is the spec as published, which the settings keep: with
	// a host port 0 the next start takes another free port.
	Published string `json:"published"`
}

// PortOf is the Port of a spec in force and the one it was published as.
func PortOf(spec, published ports.Spec) Port {
	return Port{Spec: spec.String(), HostIP: spec.HostIP.String(), HostPort: int(spec.HostPort),
		GuestPort: int(spec.GuestPort), Protocol: "tcp", Published: published.String()}
}

// servePorts adds PathPorts to mux.
func servePorts(mux *http.ServeMux, b Backend) {
	mux.HandleFunc("GET "+PathPorts, func(w http.ResponseWriter, r *http.Request) {
		all := b.Ports()
		if all == nil {
			all = []Port{}
		}
		writeJSON(w, http.StatusOK, all)
	})
	mux.HandleFunc("POST "+PathPorts, func(w http.ResponseWriter, r *http.Request) {
		var req PortRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, maxRequestJSON)).Decode(&req); err != nil || req.Spec == "" {
			WriteError(w, http.StatusBadRequest, `the body is not a port request ({"spec": "[HOSTIP:]HOSTPORT:GUESTPORT"})`)
			return
		}
		p, err := b.Publish(req.Spec)
		if err != nil {
			WriteError(w, portStatus(err), "not published: "+err.Error())
			return
		}
		writeJSON(w, http.StatusCreated, p)
	})
	mux.HandleFunc("DELETE "+PathPorts, func(w http.ResponseWriter, r *http.Request) {
		spec := r.URL.Query().Get("spec")
		if spec == "" {
			WriteError(w, http.StatusBadRequest, "DELETE "+PathPorts+" needs ?spec=SPEC (GET "+PathPorts+" lists them)")
			return
		}
		if _, err := b.Unpublish(spec); err != nil {
			WriteError(w, portStatus(err), err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// portStatus is the HTTP status of a ports error.
func portStatus(err error) int {
	switch {
	case errors.Is(err, ports.ErrBadSpec):
		return http.StatusBadRequest
	case errors.Is(err, ports.ErrNotPublished):
		return http.StatusNotFound
	case errors.Is(err, ports.ErrInUse), errors.Is(err, ErrStopping):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// Ports is GET /v1/ports.
func (c *Client) Ports(ctx context.Context) ([]Port, error) {
	var all []Port
	err := c.do(ctx, http.MethodGet, PathPorts, nil, nil, &all)
	return all, err
}

// Publish is POST /v1/ports: spec published, and kept in the settings.
func (c *Client) Publish(ctx context.Context, spec string) (Port, error) {
	b, err := json.Marshal(PortRequest{Spec: spec})
	if err != nil {
		return Port{}, err
	}
	var p Port
	err = c.do(ctx, http.MethodPost, PathPorts, nil, bytes.NewReader(b), &p)
	return p, err
}

// Unpublish is DELETE /v1/ports?spec=SPEC.
func (c *Client) Unpublish(ctx context.Context, spec string) error {
	return c.do(ctx, http.MethodDelete, PathPorts, url.Values{"spec": {spec}}, nil, nil)
}
