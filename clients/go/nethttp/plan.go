package nethttp

// Plan (docs/http.md, One decision per request, step 1): the checks a
// request needs, each policy with its subject and keys; none for an
// exempt client. Costs come next (cost.go).

// check is one policy applied to one request.
type check struct {
	p    *policy
	s    subject
	key  string
	okey string // "" unless the policy is overridable
	cost int64
	// leaseID: the lease a concurrency check's admitted RL.ALL took, for
	// its release; 0 when it holds none.
	leaseID int64
}

// checkFor is a policy's check for this client, its cost not yet known,
// and whether the client is exempt.
func checkFor(c *config, p *policy, id *identity) (check, bool) {
	head, tail := id.subjectParts(p)
	s, key, okey := subjectKeys(c.prefix, head, tail, p)
	return check{p: p, s: s, key: key, okey: okey}, id.exempt()
}

// plan is the checks of the policies, in check order; none: the request
// is not checked (an exempt client's never is).
func plan(c *config, policies []*policy, id *identity) []check {
	if id.exempt() {
		return nil
	}
	checks := make([]check, 0, len(policies))
	for _, p := range policies {
		ch, _ := checkFor(c, p, id)
		checks = append(checks, ch)
	}
	return checks
}
