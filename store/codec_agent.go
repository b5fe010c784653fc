package store

// Agent events: field numbers 384–447. They are on disk in every store
// (see the format in codec.go): never change or reuse one; a new field
// takes the next number and becomes agentKnown.
const (
	fAgentState  = 384
	fAgentDetail = 385
	fAgentCount  = 386
)

// The Agent block (lo inclusive, hi exclusive) and the highest number this
// build knows in it.
const agentLo, agentHi, agentKnown = 384, 448, fAgentCount

var agentStates = []string{AgentSilent, AgentResumed, AgentViolation, AgentRateLimited, AgentCapped}

func (a *Agent) appendTo(b []byte) []byte {
	b = appendString(b, fAgentState, a.State)
	b = appendString(b, fAgentDetail, a.Detail)
	b = appendInt(b, fAgentCount, a.Count)
	return b
}

func (a *Agent) setField(f field) error {
	switch f.num {
	case fAgentState:
		return setIntern(&f, &a.State, agentStates)
	case fAgentDetail:
		return setString(&f, &a.Detail)
	case fAgentCount:
		return setInt(&f, &a.Count)
	}
	return nil
}
