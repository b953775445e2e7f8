package wire

import "time"

// NetworkPolicy is a sandbox's network, enforced on the host:
// {"internet": false} (the default: loopback only), {"internet": true}
// (every public destination, minus deny), or an allow list of host names,
// *.wildcards, IP addresses and CIDRs. Private, loopback, link-local, CGNAT
// and metadata addresses are never reachable. An invalid policy (such as
// allow with internet true) is a 400 whose message says what is wrong.
type NetworkPolicy struct {
	// Internet allows every public destination not on Deny.
	Internet bool `json:"internet"`
	// Allow lists what the sandbox may reach when Internet is false: host
	// names ("api.example.com"), wildcards ("*.example.org": every
	// subdomain, not the apex), IP addresses and CIDRs ("203.0.113.0/24").
	Allow []string `json:"allow,omitempty"`
	// Deny lists exceptions, in the same forms; deny wins over allow.
	Deny []string `json:"deny,omitempty"`
}

// CreateSecretRequest is the body of POST /v1/secrets. The value is
// write-only: no answer, log or error of the server ever contains it.
type CreateSecretRequest struct {
	// Name is the environment variable sandboxes see
	// ([A-Za-z_][A-Za-z0-9_]*).
	Name string `json:"name"`
	// Value is the credential (at most 8 KiB, no line breaks or NUL).
	Value string `json:"value"`
	// Hosts are the host names (or *.wildcards; not IP addresses) whose
	// HTTPS requests get the value.
	Hosts []string `json:"hosts"`
	// Owner is the id of the tenant key the secret is for. A key without a
	// daily limit may name any tenant key (empty: the server's own
	// secrets); a tenant key may only leave it empty or name itself.
	Owner string `json:"owner,omitempty"`
}

// Secret is a stored secret as listed: never its value.
type Secret struct {
	// Name is the secret's name and environment variable.
	Name string `json:"name"`
	// Owner is the id of the tenant key the secret belongs to; absent for
	// the server's own secrets (those of keys without a daily limit).
	Owner string `json:"owner,omitempty"`
	// Hosts are the hosts whose HTTPS requests get the value.
	Hosts []string `json:"hosts"`
	// CreatedAt is when the secret was first stored; UpdatedAt when its
	// value or hosts last changed (UTC).
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}
