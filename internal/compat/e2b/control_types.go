package e2b

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// The control plane's JSON, as the e2b SDKs send and read it (field names
// are E2B's, not Runtime's).

// newSandbox is the body of POST /sandboxes and POST /v2/sandboxes.
// Fields the SDKs send that Runtime cannot honour are refused by check
// rather than ignored.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	AutoPause           bool              `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          *autoResume       `json:"autoResume"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Secure              *bool             `json:"secure"`
	// MCP is accepted and not used: E2B's SDKs start the MCP gateway
	// themselves after the create (`mcp-gateway --config ...` as root, by
	// commands.run) and kill the sandbox when that fails, so a template
	// without the gateway fails as E2B's does ("Failed to start MCP
	// gateway"). Runtime ships no mcp-gateway template.
	MCP          json.RawMessage   `json:"mcp"`
	IAM          json.RawMessage   `json:"iam"`
	VolumeMounts []json.RawMessage `json:"volumeMounts"`
}

type autoResume struct {
	Enabled bool `json:"enabled"`
}

// networkConfig is E2B's sandbox network: allowOut (CIDRs, addresses,
// names), denyOut (CIDRs, addresses) and options Runtime does not have.
type networkConfig struct {
	AllowPublicTraffic *bool           `json:"allowPublicTraffic"`
	AllowOut           []string        `json:"allowOut"`
	DenyOut            []string        `json:"denyOut"`
	DNSServers         []string        `json:"dnsServers"`
	EgressProxy        json.RawMessage `json:"egressProxy"`
	MaskRequestHost    string          `json:"maskRequestHost"`
	HTTPSPorts         []int           `json:"httpsPorts"`
	Rules              json.RawMessage `json:"rules"`
}

func isSet(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "{}"
}

// check refuses what Runtime cannot do, saying so.
func (n *newSandbox) check() error {
	switch {
	case n.TemplateID == "":
		return fmt.Errorf("templateID is missing; name a template, such as \"base\"")
	case isSet(n.IAM):
		return fmt.Errorf("iam (workload identity) is not supported by Runtime; use Runtime secrets for credentials")
	case len(n.VolumeMounts) > 0:
		return fmt.Errorf("volumeMounts are not supported by Runtime; create the sandbox without volumes")
	case n.Timeout != nil && *n.Timeout <= 0:
		return fmt.Errorf("timeout must be a positive number of seconds; got %d", *n.Timeout)
	}
	return nil
}

// policy maps E2B's network fields to Runtime's network policy. E2B's
// default is internet access; allow_internet_access false or a denyOut of
// 0.0.0.0/0 shuts it, leaving allowOut as Runtime's allow list. Other
// denyOut entries become Runtime's deny list (where deny wins over allow,
// unlike E2B; an allowOut entry inside a denied range is refused).
func policy(allowInternet *bool, n *networkConfig) (*api.NetworkPolicy, error) {
	p := &api.NetworkPolicy{Internet: allowInternet == nil || *allowInternet}
	if n == nil {
		return p, nil
	}
	switch {
	case len(n.DNSServers) > 0:
		return nil, fmt.Errorf("network.dnsServers is not supported by Runtime: its sandboxes resolve names through the host's egress DNS")
	case isSet(n.EgressProxy):
		return nil, fmt.Errorf("network.egressProxy is not supported by Runtime")
	case n.MaskRequestHost != "":
		if err := checkMaskHost(n.MaskRequestHost); err != nil {
			return nil, err
		}
	case isSet(n.Rules):
		return nil, fmt.Errorf("network.rules (request transforms) are not supported by Runtime; use Runtime secrets, which the egress proxy injects")
	case len(n.HTTPSPorts) > 0:
		return nil, fmt.Errorf("network.httpsPorts is not supported by Runtime")
	}
	var deny []netip.Prefix
	for _, d := range n.DenyOut {
		pf, err := parsePrefix(d)
		if err != nil {
			return nil, fmt.Errorf("network.denyOut: %q is not a CIDR block or IP address (E2B takes no names there): %v", d, err)
		}
		if pf.Bits() == 0 {
			p.Internet = false
			continue
		}
		deny = append(deny, pf)
		p.Deny = append(p.Deny, d)
	}
	for _, a := range n.AllowOut {
		if pf, err := parsePrefix(a); err == nil {
			for _, d := range deny {
				if d.Overlaps(pf) {
					return nil, fmt.Errorf("network.allowOut %q lies inside denyOut %s; Runtime's deny list wins over its allow list, so leave one of them out", a, d)
				}
			}
		}
		if p.Internet {
			continue // everything not denied is allowed already
		}
		p.Allow = append(p.Allow, a)
	}
	if p.Internet {
		p.Allow = nil
	}
	return p, nil
}

// checkMaskHost checks a mask_request_host: a host name or address, with
// an optional port, in which "${PORT}" stands for the sandbox port a
// request goes to (E2B's variable), at most 253 bytes.
func checkMaskHost(mask string) error {
	h := strings.ReplaceAll(mask, "${PORT}", "8080")
	bad := len(mask) > 253 || h == "" || strings.ContainsAny(h, " /?#@\\") || strings.IndexFunc(h, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0
	if !bad {
		u, err := url.Parse("http://" + h)
		bad = err != nil || u.Host != h || u.Hostname() == ""
	}
	if bad {
		return fmt.Errorf("network.maskRequestHost %q is not a host[:port] (\"${PORT}\" may stand for the port), such as \"${PORT}-app.example.com\"", mask)
	}
	return nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// createdSandbox is the answer of a create or a connect.
type createdSandbox struct {
	TemplateID      string `json:"templateID"`
	SandboxID       string `json:"sandboxID"`
	ClientID        string `json:"clientID"`
	EnvdVersion     string `json:"envdVersion"`
	EnvdAccessToken string `json:"envdAccessToken"`
	// TrafficAccessToken is the access token again: e2b-code-interpreter
	// sends it (E2B-Traffic-Access-Token), not X-Access-Token, on /contexts.
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// sandboxDetail is GET /sandboxes/{id}; listedSandbox an entry of a list.
type sandboxDetail struct {
	listedSandbox
	AllowInternetAccess *bool      `json:"allowInternetAccess,omitempty"`
	Domain              *string    `json:"domain"`
	Lifecycle           *lifecycle `json:"lifecycle,omitempty"`
	Network             *netOut    `json:"network,omitempty"`
}

type listedSandbox struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int64             `json:"cpuCount"`
	MemoryMB    int64             `json:"memoryMB"`
	DiskSizeMB  int64             `json:"diskSizeMB"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
	Metadata    map[string]string `json:"metadata"`
}

type lifecycle struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

type netOut struct {
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
	// AllowPublicTraffic: the sandbox's ports answer on their
	// PORT-SANDBOX.DOMAIN hosts without its traffic access token.
	AllowPublicTraffic bool `json:"allowPublicTraffic"`
	// MaskRequestHost is the Host header programs in the sandbox see on
	// relayed requests ("${PORT}" the port), when the create set one.
	MaskRequestHost string `json:"maskRequestHost,omitempty"`
}

// listed describes a Runtime sandbox in E2B's terms; tpl is the E2B
// template name it was created with ("" for sandboxes made otherwise).
func listed(sb api.Sandbox, tpl string) listedSandbox {
	if tpl == "" {
		tpl = sb.Template
	}
	state := sb.State
	if state == "starting" {
		state = "running"
	}
	meta := sb.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return listedSandbox{TemplateID: tpl, Alias: tpl, SandboxID: e2bID(sb.ID), ClientID: ClientID,
		StartedAt: sb.CreatedAt, EndAt: sb.LeaseEndsAt, CPUCount: int64(math.Ceil(sb.CPU)),
		MemoryMB: sb.MemoryMiB, DiskSizeMB: sb.DiskMiB, State: state, EnvdVersion: EnvdVersion, Metadata: meta}
}

func detail(sb api.Sandbox, tpl string, net *api.NetworkPolicy) sandboxDetail {
	d := sandboxDetail{listedSandbox: listed(sb, tpl)}
	onTimeout := "kill"
	if sb.OnLeaseEnd == "pause" {
		onTimeout = "pause"
	}
	d.Lifecycle = &lifecycle{AutoResume: sb.AutoResume, OnTimeout: onTimeout}
	if net != nil {
		internet := net.Internet
		d.AllowInternetAccess = &internet
		d.Network = &netOut{AllowOut: net.Allow, DenyOut: net.Deny}
		if !internet {
			d.Network.DenyOut = append([]string{"0.0.0.0/0"}, net.Deny...)
		}
	}
	return d
}
