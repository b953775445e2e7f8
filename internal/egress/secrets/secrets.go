// Package secrets lets sandbox code use a credential it never holds.
//
// The sandbox sees a placeholder (in an environment variable). When it makes
// an HTTPS request to one of the secret's hosts, the egress proxy terminates
// TLS with a certificate from the Runtime CA (which the sandbox trusts),
// replaces the placeholder in the request headers with the value, and
// forwards the request over TLS that it verifies against the real roots.
// The value exists only in the host process and on the wire to the upstream.
package secrets

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"withruntime.dev/runtime/internal/egress/policy"
)

// Secret is a named credential and the hosts it may be sent to.
type Secret struct {
	// Name is the environment variable the sandbox sees ([A-Z_][A-Z0-9_]*).
	Name string
	// Value is the credential. It is never logged, printed or returned.
	Value string
	// Hosts are the names (or *.wildcards) whose requests get the value.
	Hosts []string
}

// String hides the value.
func (s Secret) String() string {
	return fmt.Sprintf("secret %s for %s (value hidden)", s.Name, strings.Join(s.Hosts, ","))
}

// GoString hides the value from %#v too.
func (s Secret) GoString() string { return s.String() }

// LogValue hides the value from slog.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", s.Name), slog.Any("hosts", s.Hosts))
}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// Validate checks a secret's name, hosts and value (without echoing it).
func Validate(s Secret) error {
	if !nameRE.MatchString(s.Name) {
		return fmt.Errorf("secret name %q: use letters, digits and _ (an environment variable name)", s.Name)
	}
	if why := reservedName(s.Name); why != "" {
		return fmt.Errorf("secret name %q is reserved: %s; choose another name such as %s_TOKEN", s.Name, why, strings.ToUpper(s.Name))
	}
	if s.Value == "" {
		return fmt.Errorf("secret %s: empty value", s.Name)
	}
	if len(s.Value) > 8192 || strings.ContainsAny(s.Value, "\r\n\x00") {
		return fmt.Errorf("secret %s: the value must be at most 8 KiB with no line breaks or NUL (it goes into a header)", s.Name)
	}
	if len(s.Hosts) == 0 {
		return fmt.Errorf("secret %s: no hosts", s.Name)
	}
	if _, err := policy.Compile(policy.Policy{Allow: s.Hosts}, nil); err != nil {
		return fmt.Errorf("secret %s hosts: %w", s.Name, err)
	}
	for _, h := range s.Hosts {
		if looksLikeAddr(h) {
			return fmt.Errorf("secret %s hosts: %q: secrets are sent to host names only (TLS certificates are checked against the name)", s.Name, h)
		}
	}
	return nil
}

// reservedNames are environment variables that shells, the dynamic linker,
// interpreters and TLS libraries read for their own use: a secret's
// placeholder in one of them breaks every command (PATH) or changes what
// runs (LD_PRELOAD). TrustEnvNames are the CA variables Runtime sets itself.
var reservedNames = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TMPDIR",
	"HOSTNAME", "TERM", "LANG", "IFS", "ENV", "BASH_ENV", "CDPATH", "PS4", "PYTHONPATH", "PYTHONHOME",
	"PYTHONSTARTUP", "NODE_OPTIONS", "NODE_PATH"}

// proxyNames are the variables that tell HTTP clients which proxy to use
// or not to use; clients read them in either case (curl only lower-case
// http_proxy, Python and Go both).
var proxyNames = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY"}

// trustNames are the variables that choose which certificate authorities
// TLS clients trust.
var trustNames = []string{"SSL_CERT_DIR"}

// reservedName says why name (in any case) may not be a secret's, or ""
// when it may.
func reservedName(name string) string {
	up := strings.ToUpper(name)
	switch {
	case slices.Contains(proxyNames, up):
		return "HTTP clients read it, in any case, to pick the proxy for their connections (a placeholder there would break every request)"
	case slices.Contains(TrustEnvNames, up) || slices.Contains(trustNames, up):
		return "it chooses the certificate authorities TLS clients trust, which Runtime sets itself for a sandbox with secrets"
	case strings.HasPrefix(up, "LD_") || strings.HasPrefix(up, "LC_") || strings.HasPrefix(up, "BASH_FUNC_") ||
		slices.Contains(reservedNames, up):
		return "the sandbox's programs need this variable for themselves (a placeholder there would break them)"
	}
	return ""
}

func looksLikeAddr(h string) bool {
	return strings.ContainsAny(h, ":/") || strings.Trim(h, "0123456789.") == ""
}

// Placeholder returns the stand-in a sandbox sees for a secret. It is
// derived from a host key, the sandbox id and the secret's name, so it is
// the same after a server restart and tells nothing about the value.
func Placeholder(key []byte, sandboxID, name string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sandboxID + "\x00" + name))
	return "wr_placeholder_" + strings.ToLower(name) + "_" + hex.EncodeToString(m.Sum(nil)[:16])
}

// binding is one secret as one sandbox uses it.
type binding struct {
	placeholder, value string
	hosts              *policy.Matcher
}

// Set is the secrets of one sandbox. It is immutable.
type Set struct {
	bindings []binding
}

// NewSet binds secrets to a sandbox and returns the set and the environment
// (NAME -> placeholder) the sandbox must get.
func NewSet(key []byte, sandboxID string, ss []Secret) (*Set, map[string]string, error) {
	set := &Set{}
	env := map[string]string{}
	for _, s := range ss {
		if err := Validate(s); err != nil {
			return nil, nil, err
		}
		if _, dup := env[s.Name]; dup {
			return nil, nil, fmt.Errorf("secret %s given twice", s.Name)
		}
		m, _ := policy.Compile(policy.Policy{Allow: s.Hosts}, nil)
		ph := Placeholder(key, sandboxID, s.Name)
		env[s.Name] = ph
		set.bindings = append(set.bindings, binding{placeholder: ph, value: s.Value, hosts: m})
	}
	return set, env, nil
}

// Covers reports whether any secret is bound to host, that is whether the
// proxy must intercept TLS to it.
func (s *Set) Covers(host string) bool {
	if s == nil {
		return false
	}
	for _, b := range s.bindings {
		if b.hosts.AllowName(host) {
			return true
		}
	}
	return false
}

// Inject replaces, in every request header value, the placeholders of the
// secrets bound to host with their values (inside Basic credentials too).
// It returns how many replacements were made.
func (s *Set) Inject(h http.Header, host string) int {
	if s == nil {
		return 0
	}
	n := 0
	for _, b := range s.bindings {
		if !b.hosts.AllowName(host) {
			continue
		}
		for k, vs := range h {
			for i, v := range vs {
				if nv, ok := replaceBasic(v, b.placeholder, b.value); ok {
					vs[i], n = nv, n+1
					continue
				}
				if strings.Contains(v, b.placeholder) {
					vs[i] = strings.ReplaceAll(v, b.placeholder, b.value)
					n++
				}
			}
			h[k] = vs
		}
	}
	return n
}

// Scrub replaces every secret value in response headers with its
// placeholder, so that an upstream echoing the credential back does not hand
// it to the sandbox.
func (s *Set) Scrub(h http.Header) {
	if s == nil {
		return
	}
	for _, b := range s.bindings {
		for k, vs := range h {
			for i, v := range vs {
				if strings.Contains(v, b.value) {
					vs[i] = strings.ReplaceAll(v, b.value, b.placeholder)
				}
			}
			h[k] = vs
		}
	}
}

// replaceBasic handles "Basic base64(user:password)" where the placeholder
// is inside the encoded credentials.
func replaceBasic(v, placeholder, value string) (string, bool) {
	scheme, enc, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil || !strings.Contains(string(raw), placeholder) {
		return "", false
	}
	return scheme + " " + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(string(raw), placeholder, value))), true
}
