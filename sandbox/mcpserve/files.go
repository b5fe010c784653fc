package mcpserve

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// WriteArgs is a file for sandbox_write_file.
type WriteArgs struct {
	Name    string `json:"name" jsonschema:"the running sandbox"`
	Path    string `json:"path" jsonschema:"the file's path in the sandbox: absolute, or relative to /workspace"`
	Content string `json:"content" jsonschema:"the file's content: text, or base64 when base64 is true"`
	Base64  bool   `json:"base64,omitempty" jsonschema:"content is base64 (for bytes that are not text)"`
	Mode    string `json:"mode,omitempty" jsonschema:"its permissions in octal, as 0755; default 0644"`
}

// ReadArgs names a file for sandbox_read_file.
type ReadArgs struct {
	Name string `json:"name" jsonschema:"the running sandbox"`
	Path string `json:"path" jsonschema:"the file's path in the sandbox: absolute, or relative to /workspace"`
}

// FileResult is a file written or read.
type FileResult struct {
	Path      string `json:"path"`
	Bytes     int64  `json:"bytes" jsonschema:"how many bytes were written, or are in content"`
	Content   string `json:"content,omitempty" jsonschema:"read: the file's bytes, as text or base64 (encoding says which)"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"read: utf-8 or base64"`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"read: the file is longer than the server's limit; content is its start"`
	Note      string `json:"note,omitempty" jsonschema:"read: what was cut"`
}

func (s *server) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in WriteArgs) (*mcp.CallToolResult, FileResult, error) {
	data := []byte(in.Content)
	if in.Base64 {
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, FileResult{}, fmt.Errorf("content is not base64: %v", err)
		}
	}
	if len(data) > s.cfg.MaxFile {
		return nil, FileResult{}, fmt.Errorf("%d bytes is over this server's limit of %d for a file: write it in parts (sandbox_exec can join them)", len(data), s.cfg.MaxFile)
	}
	c, err := s.client(in.Name)
	if err != nil {
		return nil, FileResult{}, err
	}
	defer c.Close()
	if err := c.PutFile(ctx, in.Path, bytes.NewReader(data), in.Mode); err != nil {
		return nil, FileResult{}, err
	}
	msg := fmt.Sprintf("wrote %d bytes to %s", len(data), in.Path)
	return &mcp.CallToolResult{Content: text(msg)}, FileResult{Path: in.Path, Bytes: int64(len(data))}, nil
}

// errFull ends a read at the server's limit.
var errFull = errors.New("mcpserve: the file is longer than the limit")

// upTo keeps max bytes and then fails the copy, so that no more is read.
type upTo struct {
	max int
	buf []byte
}

func (u *upTo) Write(p []byte) (int, error) {
	room := u.max - len(u.buf)
	if len(p) > room {
		u.buf = append(u.buf, p[:room]...)
		return room, errFull
	}
	u.buf = append(u.buf, p...)
	return len(p), nil
}

func (s *server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in ReadArgs) (*mcp.CallToolResult, FileResult, error) {
	c, err := s.client(in.Name)
	if err != nil {
		return nil, FileResult{}, err
	}
	defer c.Close()
	w := &upTo{max: s.cfg.MaxFile}
	_, err = c.GetFile(ctx, in.Path, w)
	cut := errors.Is(err, errFull)
	if err != nil && !cut {
		return nil, FileResult{}, err
	}
	r := FileResult{Path: in.Path, Bytes: int64(len(w.buf)), Truncated: cut}
	body := w.buf
	if cut {
		// A cut inside a character is not what makes a file binary.
		for i := 0; i < utf8.UTFMax && len(body) > 0 && !utf8.Valid(body); i++ {
			body = body[:len(body)-1]
		}
	}
	if utf8.Valid(body) {
		r.Content, r.Encoding, r.Bytes = string(body), "utf-8", int64(len(body))
	} else {
		r.Content, r.Encoding = base64.StdEncoding.EncodeToString(w.buf), "base64"
	}
	msg := r.Content
	if r.Encoding == "base64" {
		msg = fmt.Sprintf("[capsem: %s is not text; its %d bytes in base64]\n%s", in.Path, len(w.buf), r.Content)
	}
	if cut {
		r.Note = fmt.Sprintf("%s is longer than this server's limit: its first %d bytes are shown", in.Path, r.Bytes)
		msg += "\n[capsem: " + r.Note + "]"
	}
	return &mcp.CallToolResult{Content: text(msg)}, r, nil
}
