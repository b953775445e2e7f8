package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/egress/podproxy"
	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/egress/secrets"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
	tplfs "withruntime.dev/runtime/internal/template/rootfs"
)

// sandboxCABundle is where a sandbox with secrets finds its CA bundle (the
// template's own roots plus the Runtime CA), named by secrets.TrustEnvNames.
const sandboxCABundle = "/etc/ssl/certs/ca-certificates.crt"

// maxCABundle caps the template's CA bundle as read (16 MiB).
const maxCABundle = 16 << 20

// network gives sandboxes their network through the egress manager.
type network struct {
	egress *egress.Manager
	ca     *secrets.CA
	// extraCAs (PEM) are trusted by every sandbox (TrustCAs).
	extraCAs []byte
	// slots are the networks prepared ahead (netslots.go).
	slots *netSlots
}

// TrustCAs makes every sandbox created from now on trust the CA
// certificates in pem (checked by the caller) besides its template's roots:
// they are added to its CA bundle, which the variables in
// secrets.TrustEnvNames point at. Call it after EnableNetwork.
func (m *Manager) TrustCAs(pem []byte) {
	if m.network != nil {
		m.network.extraCAs = pem
	}
}

// trustBundle is the CA bundle (and its variables) of a sandbox from rootfs:
// the template's own roots, the TrustCAs certificates and, for a sandbox
// with secrets, the Runtime CA. It is nil when there is nothing to add. The
// template's bundle is read inside rootfs only: a template made from an
// image is not the host's, and its bundle may be a link to a host file.
func (m *Manager) trustBundle(rootfs string, withSecrets bool) ([]byte, []string, error) {
	if len(m.network.extraCAs) == 0 && !withSecrets {
		return nil, nil, nil
	}
	bundle, err := tplfs.ReadFile(rootfs, sandboxCABundle, maxCABundle)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("sandbox CA bundle: %w", err)
	}
	if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
		bundle = append(bundle, '\n')
	}
	bundle = append(bundle, m.network.extraCAs...)
	if withSecrets {
		bundle = m.network.ca.Bundle(bundle)
	}
	env := make([]string, 0, len(secrets.TrustEnvNames))
	for _, n := range secrets.TrustEnvNames {
		env = append(env, n+"="+sandboxCABundle)
	}
	return bundle, env, nil
}

// EnableNetwork gives every sandbox created from now on a network on the
// host (see package egress), with the policy its create asks for ({internet:
// false} by default: loopback only, but changeable while it runs). ca is the
// Runtime CA for secrets (nil: secrets are refused). Call it before Recover,
// which re-attaches the networks of running sandboxes and removes leftovers.
func (m *Manager) EnableNetwork(e *egress.Manager, ca *secrets.CA) {
	m.network = &network{egress: e, ca: ca, slots: newNetSlots()}
}

// netPlan is a create's checked network: its normalized policy and the
// secrets it binds (with their values), all of owner.
type netPlan struct {
	policy  egress.Policy
	owner   string
	names   []string
	secrets []egress.Secret
}

// driverPolicy is the policy a Networker driver boots the sandbox under:
// nil (nothing out) without a plan.
func (p *netPlan) driverPolicy() *egress.Policy {
	if p == nil {
		return nil
	}
	pol := p.policy
	return &pol
}

// planDriverNetwork checks a create's network for a driver that enforces
// it itself (driver.Networker): the policy as egress would normalize it,
// then what the driver can enforce. Secrets are only counted (the driver
// refuses them or not) before they are looked up.
func (m *Manager) planDriverNetwork(ctx context.Context, p CreateParams) (*netPlan, error) {
	plan := &netPlan{owner: p.SecretOwner}
	if p.Network != nil {
		plan.policy = *p.Network
	}
	pol, err := policy.Normalize(plan.policy, policy.NewGuard())
	if err != nil {
		return nil, errs.New(errs.Invalid, "network policy: %v", err)
	}
	plan.policy = pol
	if err := m.netDriver.CheckNetwork(pol, len(p.Secrets)); err != nil {
		return nil, err
	}
	if len(p.Secrets) > 0 {
		if m.driverEgress == nil || m.driverEgress.ca == nil {
			return nil, errs.New(errs.Invalid, "secrets: this server serves no egress proxy for its sandboxes; create the sandbox without secrets")
		}
		if err := m.lookupSecrets(ctx, p, plan); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// lookupSecrets checks a create's secrets and adds them, with their
// values, to plan.
func (m *Manager) lookupSecrets(ctx context.Context, p CreateParams, plan *netPlan) error {
	seen := map[string]bool{}
	for _, name := range p.Secrets {
		if seen[name] {
			return errs.New(errs.Invalid, "secrets: %q is listed twice", name)
		}
		seen[name] = true
		if _, ok := p.Env[name]; ok {
			return errs.New(errs.Invalid, "secrets: %q is also set in env; a secret's variable holds its placeholder", name)
		}
		// Another key's secret answers exactly as a missing one.
		sec, err := m.store.GetSecret(ctx, p.SecretOwner, name)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.NotFound, "secrets: no secret %q; create it with POST /v1/secrets (list yours with GET /v1/secrets)", name)
		}
		if err != nil {
			return err
		}
		plan.names = append(plan.names, name)
		plan.secrets = append(plan.secrets, egress.Secret{Name: sec.Name, Value: sec.Value, Hosts: sec.Hosts})
	}
	return nil
}

// planNetwork checks a create's network and secrets before anything is made.
func (m *Manager) planNetwork(ctx context.Context, p CreateParams) (*netPlan, error) {
	if m.network == nil && m.netDriver != nil {
		return m.planDriverNetwork(ctx, p)
	}
	if m.network == nil {
		if (p.Network != nil && !p.Network.None()) || len(p.Secrets) > 0 {
			return nil, errs.New(errs.Invalid, "network: this server runs sandboxes without a network (egress is not enabled); omit network and secrets")
		}
		return nil, nil
	}
	plan := &netPlan{owner: p.SecretOwner}
	if p.Network != nil {
		plan.policy = *p.Network
	}
	pol, err := m.network.egress.Validate(plan.policy)
	if err != nil {
		return nil, err
	}
	plan.policy = pol
	if err := m.lookupSecrets(ctx, p, plan); err != nil {
		return nil, err
	}
	if len(plan.secrets) > 0 && m.network.ca == nil {
		return nil, errs.New(errs.Invalid, "secrets: this server has no egress CA configured")
	}
	return plan, nil
}

// attachNetwork records the sandbox's network and attaches it on the host.
// It returns the driver's network and the environment to add (secret
// placeholders and CA bundle variables). On error nothing is left attached.
func (m *Manager) attachNetwork(ctx context.Context, id, rootfs string, plan *netPlan) (*driver.Network, []string, error) {
	if plan == nil {
		return nil, nil, nil
	}
	pol, _ := json.Marshal(plan.policy)
	if err := m.store.SetSandboxNetwork(ctx, id, store.SandboxNetwork{Policy: pol, Secrets: plan.names, SecretOwner: plan.owner}); err != nil {
		return nil, nil, err
	}
	if m.network == nil {
		return nil, nil, nil // the driver enforces it (Spec.Policy)
	}
	att, err := m.network.egress.Attach(ctx, id, plan.policy)
	if err != nil {
		return nil, nil, err
	}
	dn := &driver.Network{NetnsPath: att.NetnsPath, ResolvConf: att.ResolvConf}
	bundle, env, err := m.trustBundle(rootfs, len(plan.secrets) > 0)
	if err != nil {
		m.detachNetwork(context.WithoutCancel(ctx), id)
		return nil, nil, err
	}
	dn.CABundle = bundle
	if len(plan.secrets) == 0 {
		return dn, env, nil
	}
	placeholders, err := m.network.egress.SetSecrets(id, plan.secrets)
	if err != nil {
		m.detachNetwork(context.WithoutCancel(ctx), id)
		return nil, nil, err
	}
	for _, name := range plan.names {
		env = append(env, name+"="+placeholders[name])
	}
	return dn, env, nil
}

// detachNetwork removes a stopped sandbox's network from the host.
func (m *Manager) detachNetwork(ctx context.Context, id string) {
	if m.network == nil {
		return
	}
	if err := m.network.egress.Detach(ctx, id); err != nil {
		m.log.Error("detach sandbox network", "sandbox", id, "err", err)
	}
}

// reattachNetwork serves a running sandbox's network again after a server
// restart: Attach adopts its namespace and veth, and its secrets (of the
// owner recorded at create) are bound again with their current values (same
// placeholders). A secret deleted meanwhile is no longer injected.
func (m *Manager) reattachNetwork(ctx context.Context, id string) {
	if m.network == nil && m.netDriver != nil {
		m.reapplyDriverNetwork(ctx, id)
		return
	}
	if m.network == nil {
		return
	}
	rec, err := m.store.GetSandboxNetwork(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return // created without a network
	}
	if err != nil {
		m.log.Error("re-attach sandbox network", "sandbox", id, "err", err)
		return
	}
	var pol egress.Policy
	_ = json.Unmarshal(rec.Policy, &pol)
	if _, err := m.network.egress.Attach(ctx, id, pol); err != nil {
		m.log.Error("re-attach sandbox network", "sandbox", id, "err", err)
		return
	}
	if len(rec.Secrets) > 0 {
		m.bindSecrets(ctx, id, rec)
	}
}

// bindSecrets gives the egress proxy the current value and hosts of each
// secret the sandbox's network record names, of the owner it records.
// Placeholders derive from the sandbox and the name, so they stay the same;
// a secret deleted meanwhile, or whose value does not decrypt, is not
// injected (its placeholder goes out as is).
func (m *Manager) bindSecrets(ctx context.Context, id string, rec store.SandboxNetwork) {
	var ss []egress.Secret
	for _, name := range rec.Secrets {
		sec, err := m.store.GetSecret(ctx, rec.SecretOwner, name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			m.log.Error("bind sandbox secret", "sandbox", id, "secret", name, "err", err)
			continue
		}
		ss = append(ss, egress.Secret{Name: sec.Name, Value: sec.Value, Hosts: sec.Hosts})
	}
	if _, err := m.network.egress.SetSecrets(id, ss); err != nil {
		m.log.Error("bind sandbox secrets", "sandbox", id, "err", err)
	}
}

// SecretChanged applies the new value and hosts, or the deletion, of the
// secret (owner, name) to the running sandboxes created with it: their next
// requests carry the new value (a deleted secret's placeholder goes out
// unreplaced). Requests already sent are not changed.
func (m *Manager) SecretChanged(ctx context.Context, owner, name string) {
	if m.network == nil {
		return
	}
	m.mu.Lock()
	ids := make([]string, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		rec, err := m.store.GetSandboxNetwork(ctx, id)
		if err != nil || rec.SecretOwner != owner || !slices.Contains(rec.Secrets, name) {
			continue
		}
		m.bindSecrets(ctx, id, rec)
	}
}

// cleanupNetworks removes the networks of sandboxes that no longer run
// (leftovers of an earlier process, and the prepared networks it left:
// they have no record), of this server's egress names only.
// Recover calls it last, when no record is left starting.
func (m *Manager) cleanupNetworks(ctx context.Context) {
	if m.network == nil {
		return
	}
	// Networks of the sandboxes Recover stopped go first (not twice).
	m.network.slots.waitDetached()
	records, err := m.store.ListSandboxes(ctx, store.SandboxFilter{})
	if err != nil {
		m.log.Error("clean up sandbox networks", "err", err)
		return
	}
	keep := map[string]bool{}
	for _, sb := range records {
		// A paused sandbox gets a network again when it resumes.
		if sb.State == store.StateRunning || sb.State == store.StateStarting {
			keep[sb.ID] = true
		}
	}
	if err := m.network.egress.Cleanup(ctx, func(id string) bool { return keep[id] }); err != nil {
		m.log.Error("clean up sandbox networks", "err", err)
	}
}

// Network returns a running sandbox's effective network policy.
func (m *Manager) Network(ctx context.Context, id string) (egress.Policy, error) {
	if _, err := m.usable(ctx, id); err != nil {
		return egress.Policy{}, err
	}
	if m.network == nil && m.netDriver != nil {
		rec, err := m.store.GetSandboxNetwork(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return egress.Policy{}, nil // booted with nothing out
		}
		if err != nil {
			return egress.Policy{}, err
		}
		var pol egress.Policy
		if err := json.Unmarshal(rec.Policy, &pol); err != nil {
			return egress.Policy{}, fmt.Errorf("network policy of %s: %w", id, err)
		}
		return pol, nil
	}
	if m.network == nil {
		return egress.Policy{}, nil
	}
	att, err := m.network.egress.Attachment(id)
	if err != nil {
		return egress.Policy{}, errs.New(errs.Conflict, "sandbox %s has no network on this server (it was created without one)", id)
	}
	return att.Policy, nil
}

// SetNetwork changes a running sandbox's network policy. It applies to new
// connections and DNS queries; connections already open stay open.
func (m *Manager) SetNetwork(ctx context.Context, id string, p egress.Policy) (egress.Policy, error) {
	if m.network == nil && m.netDriver != nil {
		return m.setDriverNetwork(ctx, id, p)
	}
	if m.network == nil {
		if p.None() {
			return egress.Policy{}, nil
		}
		return egress.Policy{}, errs.New(errs.Invalid, "network: this server runs sandboxes without a network (egress is not enabled)")
	}
	pol, err := m.network.egress.Validate(p)
	if err != nil {
		return egress.Policy{}, err
	}
	if _, err := m.usable(ctx, id); err != nil {
		return egress.Policy{}, err
	}
	rec, err := m.store.GetSandboxNetwork(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return egress.Policy{}, errs.New(errs.Conflict, "sandbox %s has no network on this server (it was created without one)", id)
	}
	if err != nil {
		return egress.Policy{}, err
	}
	rec.Policy, _ = json.Marshal(pol)
	if err := m.store.SetSandboxNetwork(ctx, id, rec); err != nil {
		return egress.Policy{}, err
	}
	if err := m.network.egress.Update(ctx, id, pol); err != nil {
		if errors.Is(err, egress.ErrNotAttached) {
			if _, rerr := m.Running(ctx, id); rerr != nil {
				return egress.Policy{}, rerr
			}
			return egress.Policy{}, errs.New(errs.Conflict, "sandbox %s's network is not attached to this server", id)
		}
		return egress.Policy{}, err
	}
	return pol, nil
}

// setDriverNetwork is SetNetwork for a driver that enforces policies itself:
// checked like a create's, recorded, then handed to the driver.
func (m *Manager) setDriverNetwork(ctx context.Context, id string, p egress.Policy) (egress.Policy, error) {
	plan, err := m.planDriverNetwork(ctx, CreateParams{Network: &p})
	if err != nil {
		return egress.Policy{}, err
	}
	if _, err := m.usable(ctx, id); err != nil {
		return egress.Policy{}, err
	}
	rec, err := m.store.GetSandboxNetwork(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return egress.Policy{}, err
	}
	rec.Policy, _ = json.Marshal(plan.policy)
	if err := m.store.SetSandboxNetwork(ctx, id, rec); err != nil {
		return egress.Policy{}, err
	}
	if err := m.netDriver.SetNetwork(ctx, id, plan.policy); err != nil {
		return egress.Policy{}, fmt.Errorf("set network of %s: %w", id, err)
	}
	return plan.policy, nil
}

// reapplyDriverNetwork gives a sandbox adopted after a restart its recorded
// policy again on a driver that enforces policies itself (nothing out
// without a record), so that one whose policy object was lost, or that a
// server without this code made, is restricted again.
func (m *Manager) reapplyDriverNetwork(ctx context.Context, id string) {
	var pol egress.Policy
	rec, err := m.store.GetSandboxNetwork(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		m.log.Error("re-apply sandbox network", "sandbox", id, "err", err)
		return
	default:
		_ = json.Unmarshal(rec.Policy, &pol)
	}
	if err := m.netDriver.CheckNetwork(pol, 0); err != nil {
		pol = egress.Policy{} // fail closed
	}
	if err := m.netDriver.SetNetwork(ctx, id, pol); err != nil {
		m.log.Error("re-apply sandbox network", "sandbox", id, "err", err)
	}
}

// driverEgress is the egress proxy of a driver whose sandboxes reach it
// over a shared network (package podproxy): the CA of their secrets and
// the guard their policies are compiled with.
type driverEgress struct {
	ca    *secrets.CA
	guard *policy.Guard
}

// EnableDriverEgress says that this server serves the egress proxy of a
// driver that enforces policies itself (driver.Networker; Kubernetes: a
// podproxy.Server whose Load is Egress): ca (nil: secrets refused) mints
// its intercepted hosts' certificates and secrets' placeholders, guard
// (nil: policy.NewGuard()) refuses destinations no sandbox may reach. Call
// it before serving.
func (m *Manager) EnableDriverEgress(ca *secrets.CA, guard *policy.Guard) {
	if guard == nil {
		guard = policy.NewGuard()
	}
	m.driverEgress = &driverEgress{ca: ca, guard: guard}
}

// Egress is what sandbox id may reach through the driver's egress proxy,
// read from the store (shared by every replica): its recorded policy
// (nothing without a record) and its recorded secrets, of the owner
// recorded at create, with their current values and the same
// placeholders as at create. A secret deleted meanwhile is not injected.
func (m *Manager) Egress(ctx context.Context, id string) (podproxy.Egress, error) {
	if m.driverEgress == nil {
		return podproxy.Egress{}, errors.New("egress: this server serves no egress proxy for its driver")
	}
	var pol egress.Policy
	rec, err := m.store.GetSandboxNetwork(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return podproxy.Egress{}, err
	default:
		if err := json.Unmarshal(rec.Policy, &pol); err != nil {
			return podproxy.Egress{}, fmt.Errorf("network policy of %s: %w", id, err)
		}
	}
	matcher, err := policy.Compile(pol, m.driverEgress.guard)
	if err != nil {
		return podproxy.Egress{}, fmt.Errorf("network policy of %s: %w", id, err)
	}
	e := podproxy.Egress{Policy: matcher}
	if len(rec.Secrets) == 0 || m.driverEgress.ca == nil {
		return e, nil
	}
	var ss []egress.Secret
	for _, name := range rec.Secrets {
		sec, err := m.store.GetSecret(ctx, rec.SecretOwner, name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return podproxy.Egress{}, fmt.Errorf("secret %s of %s: %w", name, id, err)
		}
		ss = append(ss, egress.Secret{Name: sec.Name, Value: sec.Value, Hosts: sec.Hosts})
	}
	if e.Secrets, _, err = secrets.NewSet(m.driverEgress.ca.PlaceholderKey(), id, ss); err != nil {
		return podproxy.Egress{}, fmt.Errorf("secrets of %s: %w", id, err)
	}
	return e, nil
}

// driverSecrets is, for a create on a driver with an egress proxy, the
// environment of its secrets (placeholders, and the CA bundle variables)
// and the CA certificate its pod must trust; nothing without secrets.
func (m *Manager) driverSecrets(id string, plan *netPlan) ([]string, []byte, error) {
	if plan == nil || len(plan.secrets) == 0 {
		return nil, nil, nil
	}
	_, placeholders, err := secrets.NewSet(m.driverEgress.ca.PlaceholderKey(), id, plan.secrets)
	if err != nil {
		return nil, nil, errs.New(errs.Invalid, "%v", err)
	}
	env := make([]string, 0, len(secrets.TrustEnvNames)+len(plan.names))
	for _, n := range secrets.TrustEnvNames {
		env = append(env, n+"="+sandboxCABundle)
	}
	for _, name := range plan.names {
		env = append(env, name+"="+placeholders[name])
	}
	return env, m.driverEgress.ca.CertPEM(), nil
}
