package ui

import (
	"database/sql"
	"fmt"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/capsem/capsem/store/sqliteexport"
)

// A Reader of an exported file is a Source: capsem ui --sqlite shows a
// file as it shows a store.
var _ Source = (*sqliteexport.Reader)(nil)

// fixtureFile is the real, scrubbed session of tests/fixtures (see
// tests/fixture_test.go): claude in the guest, a tool loop, refusals, an
// MCP call.
const fixtureFile = "../tests/fixtures/session.db"

// TestFixtureInChromium shows the fixture's session in chromium: the
// values on each page are the fixture's, read from its tables here.
func TestFixtureInChromium(t *testing.T) {
	r, err := sqliteexport.OpenReader(fixtureFile)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	db, err := sql.Open("sqlite", "file:"+fixtureFile+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id string
	var denied, models int64
	var cost float64
	if err := db.QueryRow(`SELECT id, denied, model_calls, cost_usd FROM sessions`).Scan(&id, &denied, &models, &cost); err != nil {
		t.Fatal(err)
	}
	var toolSeq int64
	var toolName, toolArgs string
	if err := db.QueryRow(`SELECT m.seq, c.tool_name, c.arguments FROM tool_calls c JOIN model_calls m ON m.id = c.model_call_id
		WHERE c.tool_name = 'Bash' ORDER BY m.seq LIMIT 1`).Scan(&toolSeq, &toolName, &toolArgs); err != nil {
		t.Fatal(err)
	}

	srv := testServer(t, r)
	b := newBrowser(t)
	base := srv.URL + "/" + testToken + "/"
	b.do("the sessions page", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("#sessions")))
	for sel, want := range map[string]string{
		"td.cost":   costText(cost),
		"td.denied": strconv.FormatInt(denied, 10),
		"td.models": strconv.FormatInt(models, 10),
	} {
		if got := eval[string](b, fmt.Sprintf(`document.querySelector("#sessions tr.session %s").textContent`, sel)); got != want {
			t.Errorf("the list's %s shows %q, the fixture has %q", sel, got, want)
		}
	}
	b.screenshot("fixture-sessions")
	b.noConsoleErrors("fixture sessions")

	b.do("the session page", chromedp.Navigate(base+"s/"+id+"?decision=denied"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	b.waitFor("the host summary", `document.querySelector("#hosts .hosts-table") !== null`)
	reasons := eval[[]string](b, `Array.from(document.querySelectorAll("#rows tr.denied-row .reason")).map(e => e.textContent)`)
	for _, want := range []string{"direct-ip", "http-denied"} {
		found := false
		for _, r := range reasons {
			found = found || r == want
		}
		if !found {
			t.Errorf("the denied events show the reasons %v, want %s among them", reasons, want)
		}
	}
	b.screenshot("fixture-session-denied")
	b.noConsoleErrors("fixture session")

	// A search: the scratch file the agent made and then deleted.
	var scratch int
	if err := db.QueryRow(`SELECT count(*) FROM fs_events WHERE path = 'scratch.txt'`).Scan(&scratch); err != nil {
		t.Fatal(err)
	}
	b.do("searching the fixture", chromedp.Navigate(base+"s/"+id), chromedp.WaitVisible(chromedp.CSS("#q")),
		chromedp.SendKeys(chromedp.CSS("#q"), "scratch.txt\n"))
	b.waitFor("the search's rows", fmt.Sprintf(`location.search.includes("q=scratch.txt") && document.querySelectorAll("#rows tr.ev.k-fs").length === %d`, scratch))
	if got := eval[[]string](b, `Array.from(document.querySelectorAll("#rows tr.ev.k-fs .what span")).map(e => e.textContent)`); len(got) != 2 || got[0] != "created scratch.txt" || got[1] != "deleted scratch.txt" {
		t.Errorf("searching scratch.txt shows the file rows %q, want it created then deleted", got)
	}
	b.noConsoleErrors("fixture search")

	b.do("the model call page", chromedp.Navigate(fmt.Sprintf("%ss/%s/m/%d", base, id, toolSeq)), chromedp.WaitVisible(chromedp.CSS(".tool")))
	if got := eval[string](b, `document.querySelector(".tool pre.args").textContent`); got != toolArgs {
		t.Errorf("the %s call's arguments show %q, the fixture has %q", toolName, got, toolArgs)
	}
	if got := eval[bool](b, `document.querySelector(".tool .answer") !== null`); !got {
		t.Errorf("the %s call shows no answer; the fixture's next model call carries its result", toolName)
	}
	b.screenshot("fixture-model-call")
	b.noConsoleErrors("fixture model call")
}
