package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"
)

// inspectSQLite is capsem inspect of a file capsem export wrote: the
// session id (the newest of the file's sessions without one) is summarised
// from its row of the sessions table, and the same checks run on the file,
// opened read-only.
func inspectSQLite(c *cli.Context, file, id string, n int) error {
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("--sqlite: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	sess, err := sqliteSession(db, id)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return reportAndCheck(c, db, sess, n)
}

// sqliteSession reads the summary of session id (or of the newest session,
// for "") from an export's sessions table.
func sqliteSession(db *sql.DB, id string) (sessionSummary, error) {
	var (
		s                sessionSummary
		started          int64
		ended            sql.NullInt64
		command, sandbox sql.NullString
		exit             sql.NullInt64
	)
	q := `SELECT id, started_at_ms, ended_at_ms, command, exit_code, events, allowed, denied, lost, sandbox,
		input_tokens, output_tokens, cost_usd FROM sessions `
	var row *sql.Row
	if id != "" {
		row = db.QueryRow(q+`WHERE id = ?`, id)
	} else {
		row = db.QueryRow(q + `ORDER BY started_at_ms DESC LIMIT 1`)
	}
	err := row.Scan(&s.ID, &started, &ended, &command, &exit, &s.Events, &s.Allowed, &s.Denied, &s.Lost, &sandbox,
		&s.InputTokens, &s.OutputTokens, &s.CostUSD)
	if errors.Is(err, sql.ErrNoRows) {
		if id != "" {
			return s, fmt.Errorf("no session %s in it", display(id))
		}
		return s, errors.New("no sessions in it")
	}
	if err != nil {
		return s, fmt.Errorf("not a capsem export (%w)", err)
	}
	s.StartedAt = time.UnixMilli(started).UTC()
	if ended.Valid {
		end := time.UnixMilli(ended.Int64).UTC()
		d := ended.Int64 - started
		s.EndedAt, s.DurationMS = &end, &d
	} else {
		s.Crashed = true
	}
	if command.Valid {
		if err := json.Unmarshal([]byte(command.String), &s.Command); err != nil {
			return s, fmt.Errorf("sessions.command of %s: %w", display(s.ID), err)
		}
	}
	if exit.Valid {
		code := int(exit.Int64)
		s.ExitCode = &code
	}
	s.Sandbox = sandbox.String
	return s, nil
}
