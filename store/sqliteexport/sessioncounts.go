package sqliteexport

// sessionCounts fill the count columns of sessions from the exported
// tables, so that they agree with the rows whatever kinds the store grows.
var sessionCounts = []string{
	decisionCounts("net", "net_events"),
	decisionCounts("dns", "dns_events"),
	`UPDATE sessions SET
	model_calls   = a.n,
	input_tokens  = a.input_tokens,
	output_tokens = a.output_tokens,
	cost_usd      = a.cost
FROM (SELECT session_id,
	count(*) AS n,
	sum(input_tokens) AS input_tokens,
	sum(output_tokens) AS output_tokens,
	total(estimated_cost_usd) AS cost
	FROM model_calls GROUP BY session_id) AS a
WHERE a.session_id = sessions.id`,
	rowCounts("exec", "exec_events"),
	rowCounts("fs", "fs_events"),
	rowCounts("agent", "agent_events"),
}

// decisionCounts sets column to the rows of table, a table of decisions,
// and adds its allowed and denied decisions, each weighted by the row's
// count, to sessions.allowed and denied.
func decisionCounts(column, table string) string {
	return `UPDATE sessions SET
	` + column + ` = a.n,
	allowed = sessions.allowed + a.allowed,
	denied  = sessions.denied + a.denied
FROM (SELECT session_id,
	count(*) AS n,
	sum(CASE WHEN decision = 'allowed' THEN count ELSE 0 END) AS allowed,
	sum(CASE WHEN decision = 'denied' THEN count ELSE 0 END) AS denied
	FROM ` + table + ` GROUP BY session_id) AS a
WHERE a.session_id = sessions.id`
}

// rowCounts sets column to the rows of table.
func rowCounts(column, table string) string {
	return `UPDATE sessions SET ` + column + ` = a.n
FROM (SELECT session_id, count(*) AS n FROM ` + table + ` GROUP BY session_id) AS a
WHERE a.session_id = sessions.id`
}
