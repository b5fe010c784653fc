package ui

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/capsem/capsem/store/sqliteexport"
)

// TestReasonColourByDecision: a reason is in the red of a denial on a
// denied row only. The fixture's allowed flows carry a reason too
// ("allowed"), which must not look like the direct IP it refused.
func TestReasonColourByDecision(t *testing.T) {
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
	if err := db.QueryRow(`SELECT id FROM sessions`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var allowedReasons int
	if err := db.QueryRow(`SELECT count(*) FROM net_events WHERE decision = 'allowed' AND reason IS NOT NULL`).Scan(&allowedReasons); err != nil || allowedReasons == 0 {
		t.Fatalf("the fixture has %d allowed rows with a reason (%v); the test needs one", allowedReasons, err)
	}

	srv := testServer(t, r)
	b := newBrowser(t)
	base := srv.URL + "/" + testToken + "/s/" + id
	const colours = `Array.from(document.querySelectorAll("#rows tr.ev")).filter(tr => tr.querySelector(".reason")).map(tr =>
		tr.querySelector(".badge").textContent + " " + tr.querySelector(".reason").textContent + " " + getComputedStyle(tr.querySelector(".reason")).color)`
	const red = "rgb(192, 40, 45)" // --denied, #c0282d

	const shown = `document.querySelectorAll("#rows tr.ev .reason").length > 0`
	b.do("the denied rows", chromedp.Navigate(base+"?decision=denied"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	b.waitFor("the denied rows' reasons", shown)
	denied := eval[[]string](b, colours)
	if len(denied) == 0 {
		t.Fatal("no denied row shows a reason")
	}
	for _, d := range denied {
		if !strings.HasPrefix(d, "denied ") || !strings.HasSuffix(d, " "+red) {
			t.Errorf("a denied row's reason: %q, want it in %s", d, red)
		}
	}
	b.do("the allowed rows", chromedp.Navigate(base+"?decision=allowed"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	b.waitFor("the allowed rows' reasons", `location.search.includes("decision=allowed") && `+shown)
	allowed := eval[[]string](b, colours)
	if len(allowed) == 0 {
		t.Fatal("no allowed row shows its reason")
	}
	for _, a := range allowed {
		if !strings.HasPrefix(a, "allowed ") || strings.HasSuffix(a, " "+red) {
			t.Errorf("an allowed row's reason: %q, want it in another colour than a denial's %s", a, red)
		}
	}
	b.screenshot("reason-colours-allowed")
	b.noConsoleErrors("reason colours")
}
