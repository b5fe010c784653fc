package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/sandbox/api"
)

func askCommand() *cli.Command {
	return &cli.Command{
		Name:  "ask",
		Usage: "answer what a running sandbox's policy did not foresee ([network] unknown = \"ask\"): allow once, for the session, always, or deny",
		UsageText: "capsem ask [--data DIR] [--answer once|session|always|deny] NAME\n\n" +
			"While capsem ask runs, the sandbox holds a DNS query for a name its policy does not name, a\n" +
			"connection to a port it does not name (and an MCP tool, with [mcp] unknown = \"ask\") and asks\n" +
			"here; with nobody asking, they are refused at once. Each question waits for its answer up to\n" +
			"the policy's ask_timeout (60 s), then it is refused. \"always\" writes the answer into the\n" +
			"sandbox's overlay (policy-asked.toml in its directory), laid over its policy at every start.",
		Flags: []cli.Flag{
			dataFlag(),
			&cli.StringFlag{Name: "answer", Usage: "answer every question so, without prompting (once, session, always or deny)"},
			&cli.BoolFlag{Name: "list", Usage: "list the questions waiting and exit"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError{errors.New("want one sandbox NAME")}
			}
			fixed := c.String("answer")
			if fixed != "" && answerOf(fixed) == "" {
				return usageError{fmt.Errorf("--answer %q: write once, session, always or deny", fixed)}
			}
			name := c.Args().First()
			client, _, err := runningClient(c, name)
			if err != nil {
				return err
			}
			defer client.Close()
			out := c.App.Writer
			if c.Bool("list") {
				qs, err := client.Asks(c.Context)
				if err != nil {
					return err
				}
				for _, q := range qs {
					fmt.Fprintf(out, "%s\t%s\t%d waiting\n", q.ID, describeQuestion(q), q.Waiting)
				}
				return nil
			}
			return askLoop(c.Context, client, name, out, os.Stdin, fixed)
		},
	}
}

// answerOf reads an answer as a person types it: the word or its first
// letter; "" when it is none.
func answerOf(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, a := range []string{ask.Once, ask.Session, ask.Always, ask.Deny} {
		if s == a || len(s) == 1 && s[0] == a[0] {
			return a
		}
	}
	return ""
}

// describeQuestion is a question in words.
func describeQuestion(q ask.Question) string {
	switch {
	case q.Kind == ask.KindMCP:
		return fmt.Sprintf("the guest calls MCP tool %q of %s", q.Tool, q.Name)
	case q.Port == 0:
		return fmt.Sprintf("the guest looks up %s (allowing it allows %q: port 443)", q.Name, q.Entry)
	}
	return fmt.Sprintf("the guest connects to %s port %d (allowing it allows %q)", q.Name, q.Port, q.Entry)
}

// askLoop prompts for each question as it comes, oldest first, until
// ctx ends, the sandbox stops or in ends.
func askLoop(ctx context.Context, client *api.Client, name string, out io.Writer, in io.Reader, fixed string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates := make(chan ask.Update, 64)
	followErr := make(chan error, 1)
	go func() {
		followErr <- client.FollowAsks(ctx, func(u ask.Update) error {
			select {
			case updates <- u:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		close(updates)
	}()
	lines := make(chan string)
	if fixed == "" {
		go func() {
			sc := bufio.NewScanner(in)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
	}
	fmt.Fprintf(out, "capsem: asking for sandbox %s: the questions it holds come here (Ctrl-C ends; then they are refused)\n", name)
	var queue []ask.Question
	prompted := ""
	prompt := func() {
		if len(queue) == 0 || queue[0].ID == prompted {
			return
		}
		q := queue[0]
		prompted = q.ID
		fmt.Fprintf(out, "%s: %s\n  allow [o]nce, for this [s]ession, [a]lways, or [d]eny? ", q.ID, describeQuestion(q))
	}
	answer := func(q ask.Question, a string) {
		err := client.Answer(ctx, q.ID, ask.Answer{Answer: a, By: ask.ByCLI})
		var ae *api.Error
		switch {
		case errors.As(err, &ae) && ae.Status == 404:
			fmt.Fprintf(out, "  %s was no longer waiting (answered elsewhere or timed out)\n", q.ID)
		case err != nil:
			fmt.Fprintf(out, "  %s: %v\n", q.ID, err)
		case fixed != "":
			fmt.Fprintf(out, "%s: %s: %s\n", q.ID, describeQuestion(q), a)
		}
	}
	for {
		prompt()
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-updates:
			if !ok {
				if err := <-followErr; err != nil && ctx.Err() == nil {
					return fmt.Errorf("sandbox %s: the questions' stream ended: %w", name, err)
				}
				fmt.Fprintf(out, "\ncapsem: sandbox %s stopped\n", name)
				return nil
			}
			switch u.Type {
			case ask.UpdateAsked:
				if fixed != "" {
					answer(u.Question, fixed)
					continue
				}
				queue = append(queue, u.Question)
			case ask.UpdateAnswered:
				for i, q := range queue {
					if q.ID == u.Question.ID {
						queue = append(queue[:i], queue[i+1:]...)
						if i == 0 && prompted == q.ID {
							fmt.Fprintf(out, "\n  %s was answered elsewhere or timed out (%s)\n", q.ID, u.Reason)
							prompted = ""
						}
						break
					}
				}
			}
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if len(queue) == 0 {
				continue
			}
			a := answerOf(line)
			if a == "" {
				fmt.Fprint(out, "  write o, s, a or d: ")
				continue
			}
			q := queue[0]
			queue, prompted = queue[1:], ""
			answer(q, a)
		}
	}
}
