package itest

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/secretkey"
	"withruntime.dev/runtime/internal/server"
)

// tenant is a key with a daily limit, and requests made with it.
type tenant struct {
	e   *env
	key api.Key
}

func (e *env) newTenant(name string) *tenant {
	e.t.Helper()
	tn := &tenant{e: e}
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: name, DailyLimitMicros: 5_000_000}, &tn.key)
	return tn
}

// caller sends one request with some key.
type caller func(method, path string, body any) (int, []byte)

// admin sends requests with the server's local key (no limit).
func (e *env) admin(method, path string, body any) (int, []byte) {
	e.t.Helper()
	return e.do(method, path, body)
}

func (tn *tenant) do(method, path string, body any) (int, []byte) {
	tn.e.t.Helper()
	return tn.e.do(method, path, body, "Authorization", "Bearer "+tn.key.Secret)
}

// secretNames lists a GET /v1/secrets answer as NAME or NAME@owner.
func secretNames(t *testing.T, data []byte) []string {
	t.Helper()
	var list api.SecretList
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("secret list %s: %v", data, err)
	}
	var out []string
	for _, s := range list.Secrets {
		n := s.Name
		if s.Owner != "" {
			n += "@" + s.Owner
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// sendSecret makes sandbox id send $API_KEY to the fake internet's API host
// and returns the Authorization headers the upstream saw meanwhile.
func sendSecret(e *env, in *fakeInternet, id string) string {
	e.t.Helper()
	before := in.seenAuths()
	res := e.sh(id, curl(`-H "Authorization: Bearer $API_KEY" https://`+inetAPI+`/`))
	if res.Stdout != "200" {
		e.t.Errorf("sandbox %s: request with the secret: %+v", id, res)
	}
	return strings.TrimPrefix(in.seenAuths(), before)
}

// TestSecretsBelongToKeys: a tenant key creates, lists, uses and deletes
// only its own secrets. Another key's secret answers 404 exactly as a
// missing one does, in /v1/secrets and at sandbox create; two tenants'
// secrets of one name are two secrets, and each sandbox gets its own
// key's value from the egress proxy, also after a server restart. A key
// without a limit sees and manages every owner's.
func TestSecretsBelongToKeys(t *testing.T) {
	t.Parallel()
	in := newFakeInternet(t)
	dataDir, err := os.MkdirTemp("/tmp", "wr-secrets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	e := newEnv(t, withDataDir(dataDir), withInternet(in))
	a, b := e.newTenant("tenant-a"), e.newTenant("tenant-b")
	const valA, valB, valB2, valS = "sk-tenant-a-1f2e3d", "sk-tenant-b-4c5b6a", "sk-tenant-b-only-7d8e", "sk-server-9a8b7c"
	put := func(who caller, name, value string, owner string) api.Secret {
		t.Helper()
		status, data := who("POST", "/v1/secrets", api.CreateSecretRequest{Name: name, Value: value, Hosts: []string{inetAPI}, Owner: owner})
		var sec api.Secret
		if status != http.StatusCreated || json.Unmarshal(data, &sec) != nil {
			t.Fatalf("POST secret %s: %d %s", name, status, data)
		}
		return sec
	}
	if sec := put(a.do, "API_KEY", valA, ""); sec.Owner != a.key.ID {
		t.Errorf("tenant A's secret has owner %q, want %s", sec.Owner, a.key.ID)
	}
	put(b.do, "API_KEY", valB, "")
	put(b.do, "B_ONLY", valB2, b.key.ID) // naming itself is allowed
	if sec := put(e.admin, "API_KEY", valS, ""); sec.Owner != "" {
		t.Errorf("the server's secret has owner %q", sec.Owner)
	}

	// Each tenant lists its own; the admin lists all, or one owner's.
	for _, c := range []struct {
		who  caller
		path string
		want []string
	}{
		{a.do, "/v1/secrets", []string{"API_KEY@" + a.key.ID}},
		{a.do, "/v1/secrets?owner=" + a.key.ID, []string{"API_KEY@" + a.key.ID}},
		{b.do, "/v1/secrets", []string{"API_KEY@" + b.key.ID, "B_ONLY@" + b.key.ID}},
		{e.admin, "/v1/secrets", []string{"API_KEY", "API_KEY@" + a.key.ID, "API_KEY@" + b.key.ID, "B_ONLY@" + b.key.ID}},
		{e.admin, "/v1/secrets?owner=", []string{"API_KEY"}},
		{e.admin, "/v1/secrets?owner=" + b.key.ID, []string{"API_KEY@" + b.key.ID, "B_ONLY@" + b.key.ID}},
	} {
		status, data := c.who("GET", c.path, nil)
		slices.Sort(c.want)
		if got := secretNames(t, data); status != http.StatusOK || !slices.Equal(got, c.want) {
			t.Errorf("GET %s: %d %v, want %v", c.path, status, got, c.want)
		}
	}

	// A cannot see, replace or delete B's secrets: 404, worded as for a
	// name nobody has.
	sameAsMissing := func(what string, status int, data []byte, missStatus int, miss []byte, name, missName string) {
		t.Helper()
		if status != http.StatusNotFound || missStatus != http.StatusNotFound ||
			!bytes.Equal(bytes.ReplaceAll(data, []byte(name), []byte(missName)), miss) {
			t.Errorf("%s: %d %s; a missing one: %d %s; want the same 404", what, status, data, missStatus, miss)
		}
	}
	st, data := a.do("DELETE", "/v1/secrets/B_ONLY", nil)
	mst, miss := a.do("DELETE", "/v1/secrets/NEVER_MADE", nil)
	sameAsMissing("tenant A deletes B's B_ONLY", st, data, mst, miss, "B_ONLY", "NEVER_MADE")
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"DELETE", "/v1/secrets/B_ONLY?owner=" + b.key.ID, nil},
		{"DELETE", "/v1/secrets/API_KEY?owner=" + b.key.ID, nil},
		{"GET", "/v1/secrets?owner=" + b.key.ID, nil},
		{"POST", "/v1/secrets", api.CreateSecretRequest{Name: "API_KEY", Value: "sk-stolen", Hosts: []string{inetAPI}, Owner: b.key.ID}},
	} {
		st, data := a.do(c.method, c.path, c.body)
		mst, miss := a.do(c.method, strings.ReplaceAll(c.path, b.key.ID, "key_nobody"), replaceOwner(c.body, "key_nobody"))
		sameAsMissing("tenant A "+c.method+" "+c.path, st, data, mst, miss, b.key.ID, "key_nobody")
	}
	// Nor name one at create: refused, as a name nobody has.
	req := func(names ...string) api.CreateSandboxRequest {
		return api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}, Secrets: names}
	}
	st, data = a.do("POST", "/v1/sandboxes", req("B_ONLY"))
	mst, miss = a.do("POST", "/v1/sandboxes", req("NEVER_MADE"))
	sameAsMissing("tenant A creates a sandbox with B's B_ONLY", st, data, mst, miss, "B_ONLY", "NEVER_MADE")
	// A key without a limit uses the server's secrets, not a tenant's.
	if st, data := e.do("POST", "/v1/sandboxes", req("B_ONLY")); st != http.StatusNotFound {
		t.Errorf("an admin's sandbox with tenant B's B_ONLY: %d %s, want 404", st, data)
	}
	// Reserved names are refused, saying why.
	for _, name := range []string{"http_proxy", "Https_Proxy", "NO_PROXY", "all_proxy", "SSL_CERT_DIR"} {
		st, data := a.do("POST", "/v1/secrets", api.CreateSecretRequest{Name: name, Value: "v", Hosts: []string{inetAPI}})
		if st != http.StatusBadRequest || !strings.Contains(string(data), "reserved") {
			t.Errorf("secret named %s: %d %s, want 400 saying it is reserved", name, st, data)
		}
	}

	// Each sandbox gets its own key's value.
	mk := func(who caller) api.Sandbox {
		t.Helper()
		st, data := who("POST", "/v1/sandboxes", req("API_KEY"))
		var sb api.Sandbox
		if st != http.StatusCreated || json.Unmarshal(data, &sb) != nil {
			t.Fatalf("create with API_KEY: %d %s", st, data)
		}
		return sb
	}
	sbA, sbB, sbS := mk(a.do), mk(b.do), mk(e.admin)
	check := func(e *env, id, want string, wrong ...string) {
		t.Helper()
		seen := sendSecret(e, in, id)
		if !strings.Contains(seen, "Bearer "+want) {
			t.Errorf("sandbox %s: the upstream did not get %s; it saw:\n%s", id, want, seen)
		}
		for _, w := range wrong {
			if strings.Contains(seen, w) {
				t.Errorf("sandbox %s sent another key's value %s", id, w)
			}
		}
	}
	check(e, sbA.ID, valA, valB, valS)
	check(e, sbB.ID, valB, valA, valS)
	check(e, sbS.ID, valS, valA, valB)

	// B replaces its API_KEY: B's sandbox sends the new value, A's still its own.
	const valB3 = "sk-tenant-b-new-2b3c"
	put(b.do, "API_KEY", valB3, "")
	check(e, sbB.ID, valB3, valA)
	check(e, sbA.ID, valA, valB3)

	// After a restart each running sandbox is bound to its own key's
	// secret again.
	e.detach()
	e2 := newEnv(t, withDataDir(dataDir), withInternet(in))
	check(e2, sbA.ID, valA, valB3, valS)
	check(e2, sbB.ID, valB3, valA, valS)
	check(e2, sbS.ID, valS, valA, valB3)

	// The admin manages a tenant's secrets by naming the owner.
	a.e, b.e = e2, e2
	if st, data := e2.do("DELETE", "/v1/secrets/API_KEY?owner="+a.key.ID, nil); st != http.StatusNoContent {
		t.Errorf("admin deletes A's API_KEY: %d %s", st, data)
	}
	if st, data := a.do("GET", "/v1/secrets", nil); st != http.StatusOK || len(secretNames(t, data)) != 0 {
		t.Errorf("A's secrets after the admin deleted its only one: %d %s", st, data)
	}
	// No secret covers the host any more, so the proxy no longer intercepts
	// and the sandbox does not trust the upstream's CA: curl refuses the
	// certificate, and no value goes out.
	before := in.seenAuths()
	in.certificateRefused(t, func() agentapi.ExecResult {
		return e2.sh(sbA.ID, curl(`-H "Authorization: Bearer $API_KEY" https://`+inetAPI+`/`))
	})
	if seen := strings.TrimPrefix(in.seenAuths(), before); strings.Contains(seen, "sk-") {
		t.Errorf("A's sandbox still sends a value after its secret was deleted: %s", seen)
	}
	check(e2, sbB.ID, valB3, valA)
	if st, data := a.do("DELETE", "/v1/secrets/API_KEY", nil); st != http.StatusNotFound {
		t.Errorf("A deletes its deleted API_KEY: %d %s", st, data)
	}
	if st, data := b.do("DELETE", "/v1/secrets/B_ONLY", nil); st != http.StatusNoContent {
		t.Errorf("B deletes its own B_ONLY: %d %s", st, data)
	}
}

// replaceOwner returns body with its owner set to owner (a create request),
// or body itself.
func replaceOwner(body any, owner string) any {
	if r, ok := body.(api.CreateSecretRequest); ok {
		r.Owner = owner
		return r
	}
	return body
}

// filesHolding lists the regular files under dir that contain value.
func filesHolding(t *testing.T, dir, value string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, []byte(value)) {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return out
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Errorf("stat %s: %v", p, err)
		return 0
	}
	return fi.Mode().Perm()
}

// TestSecretsAtRest: no file of the data directory — the database, its WAL
// and -shm before and after a checkpoint, the sandboxes' files — holds a
// secret value in clear. The database files and the key are 0600 and the
// data directory 0700. A clear value left by an older version is sealed at
// the next start, and a key rotation keeps every secret working, for
// running sandboxes and new ones.
func TestSecretsAtRest(t *testing.T) {
	t.Parallel()
	in := newFakeInternet(t)
	dataDir, err := os.MkdirTemp("/tmp", "wr-atrest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dataDir, "runtime.db")
	keyFile := filepath.Join(dataDir, server.SecretsKeyFile)
	e := newEnv(t, withDataDir(dataDir), withInternet(in))
	if m := mode(t, dataDir); m != 0o700 {
		t.Errorf("data directory mode %04o, want 0700", m)
	}
	const valS, valT, valOld = "sk-atrest-server-3c4d5e", "sk-atrest-tenant-6f7a8b", "sk-atrest-legacy-9c0d1e"
	e.must(http.StatusCreated, "POST", "/v1/secrets", api.CreateSecretRequest{Name: "API_KEY", Value: valS, Hosts: []string{inetAPI}}, nil)
	tn := e.newTenant("tenant")
	if st, data := tn.do("POST", "/v1/secrets", api.CreateSecretRequest{Name: "API_KEY", Value: valT, Hosts: []string{inetAPI}}); st != http.StatusCreated {
		t.Fatalf("tenant secret: %d %s", st, data)
	}
	sb := e.create(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}, Secrets: []string{"API_KEY"}})
	if seen := sendSecret(e, in, sb.ID); !strings.Contains(seen, valS) {
		t.Errorf("the sandbox did not get the value; the upstream saw %s", seen)
	}

	dbFiles := func() []string { return []string{db, db + "-wal", db + "-shm"} }
	holding := func(value string) []string {
		var in []string
		for _, p := range dbFiles() {
			if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(value)) {
				in = append(in, filepath.Base(p))
			}
		}
		return in
	}
	// The secret's hosts are stored in clear: they show the check looks
	// where the data is.
	if len(holding(inetAPI)) == 0 {
		t.Fatal("the secret's hosts are in no database file: the check proves nothing")
	}
	if _, err := os.Stat(db + "-wal"); err != nil {
		t.Fatalf("no WAL to check: %v", err)
	}
	for _, v := range []string{valS, valT} {
		if in := holding(v); len(in) > 0 {
			t.Errorf("before a checkpoint, %v hold a value in clear", in)
		}
	}
	if err := e.srv.Store.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{valS, valT} {
		if in := filesHolding(t, dataDir, v); len(in) > 0 {
			t.Errorf("after a checkpoint, %v hold a value in clear", in)
		}
	}
	for _, p := range append(dbFiles(), keyFile) {
		if m := mode(t, p); m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", filepath.Base(p), m)
		}
	}
	oldKey, err := secretkey.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	e.detach()

	// An older version's database kept values in clear.
	raw, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO secrets (owner, name, value, sealed_with, hosts, created_at, updated_at)
		VALUES ('', 'OLD_KEY', ?, '', '["`+inetAPI+`"]', 0, 0)`, valOld); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if len(filesHolding(t, dataDir, valOld)) == 0 {
		t.Fatal("the clear value is on no file: the check after the restart proves nothing")
	}

	// The next start seals it, and rotates the key as asked.
	e2 := newEnv(t, withDataDir(dataDir), withInternet(in), func(c *server.Config) { c.RotateSecretsKey = true })
	newKey, err := secretkey.Load(keyFile)
	if err != nil || newKey.ID() == oldKey.ID() {
		t.Fatalf("key after rotation: %v %v, want a new one (was %v)", newKey, err, oldKey)
	}
	for _, v := range []string{valS, valT, valOld} {
		if in := filesHolding(t, dataDir, v); len(in) > 0 {
			t.Errorf("after the restart, %v hold a value in clear", in)
		}
	}
	// The running sandbox, bound again after the restart, and new ones
	// get the values under the new key.
	if seen := sendSecret(e2, in, sb.ID); !strings.Contains(seen, valS) {
		t.Errorf("after rotation the running sandbox did not send the value; the upstream saw %s", seen)
	}
	old := e2.create(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}, Secrets: []string{"OLD_KEY"}})
	res := e2.sh(old.ID, curl(`-H "Authorization: Bearer $OLD_KEY" https://`+inetAPI+`/`))
	if res.Stdout != "200" || !strings.Contains(in.seenAuths(), "Bearer "+valOld) {
		t.Errorf("a sandbox with the sealed legacy secret: %+v; the upstream saw %s", res, in.seenAuths())
	}
	tn.e = e2
	st, data := tn.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}, Secrets: []string{"API_KEY"}})
	var tsb api.Sandbox
	if st != http.StatusCreated || json.Unmarshal(data, &tsb) != nil {
		t.Fatalf("tenant create after rotation: %d %s", st, data)
	}
	if seen := sendSecret(e2, in, tsb.ID); !strings.Contains(seen, valT) {
		t.Errorf("after rotation the tenant's sandbox did not send its value; the upstream saw %s", seen)
	}

	// A value that does not open (here the tenant's sealed box copied over
	// the server's API_KEY) is an error that says so, never injected.
	raw, err = sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE secrets SET value = (SELECT value FROM secrets WHERE owner = ?) WHERE owner = '' AND name = 'API_KEY'`, tn.key.ID); err != nil {
		t.Fatal(err)
	}
	st, data = e2.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}, Secrets: []string{"API_KEY"}})
	if st != http.StatusInternalServerError || !strings.Contains(string(data), "does not decrypt") {
		t.Errorf("create with a secret whose value does not open: %d %s, want 500 saying it does not decrypt", st, data)
	}
}
