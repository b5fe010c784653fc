// Package ask puts to a person what a policy did not foresee: a name, a
// port or an MCP tool that no rule names, under [network] unknown = "ask"
// or [mcp] unknown = "ask". The netstack and the MCP inspectors hold the
// query, connection or call and call Broker.Ask; whoever listens (capsem
// ask NAME, the API's GET /v1/asks?follow=1, capsem ui) sees the question
// and answers it (POST /v1/asks/ID): allow once, for the session, always,
// or deny.
//
// The rules it keeps:
//
//   - With nobody listening the answer is a denial at once
//     (ReasonUnanswered), never a wait.
//   - A question not answered in its time is a denial (ReasonTimeout).
//   - Concurrent asks about one thing share one question; at most
//     MaxPending questions wait at once, the rest are denied at once
//     (ReasonCapped), so a flood of distinct names costs the host 64
//     questions.
//   - Every outcome says who answered: cli, api or ui.
//
// What it must never do:
//
//   - decide anything itself: it carries a person's answer, and says deny
//     when there is none;
//   - block the caller past its deadline or its context;
//   - hold what a listener does not read: a listener that falls behind is
//     dropped (its stream ends) and the next asks see one listener fewer;
//   - change a policy: Config.Grant, its owner's, lays a "session" or
//     "always" answer over the policy in force before the askers wake.
package ask
