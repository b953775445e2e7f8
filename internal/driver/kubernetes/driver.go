// Package kubernetes is the driver that runs each sandbox as a Kubernetes
// Pod: the template's OCI image under a RuntimeClass (gVisor's by default),
// whose PID 1 is the Runtime agent copied in by an init container, reached
// by pod IP over TCP behind credentials made for that sandbox alone
// (agentauth: a pinned certificate and a token the server keeps).
//
// It speaks to the API with client-go's typed clients and a pod informer
// limited to its own namespace and label; there is no kubectl. Each
// sandbox's network policy is a NetworkPolicy object selecting its pod
// (netpol.go; it needs a CNI that enforces them). Warm-pool pods are bound
// to the create that claims them by Claim (claim.go). What it does not do
// yet (pause) the manager finds missing through the driver's optional
// interfaces.
package kubernetes

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	k8s "k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"withruntime.dev/runtime/internal/agentauth"
	"withruntime.dev/runtime/internal/driver"
)

var (
	_ driver.Driver  = (*Driver)(nil)
	_ driver.Watcher = (*Driver)(nil)
	_ driver.Closer  = (*Driver)(nil)
	_ driver.Shared  = (*Driver)(nil)
)

// Config configures the Kubernetes driver.
type Config struct {
	// Client speaks to the cluster (required).
	Client k8s.Interface
	// Namespace holds the sandboxes' pods and secrets; it must exist, with
	// its `default` service account. Default "withruntime".
	Namespace string
	// RuntimeClass is every pod's runtimeClassName; default "gvisor" (the
	// RuntimeClass whose handler is runsc).
	RuntimeClass string
	// AgentImage is an image holding the static agent at
	// /withruntime-agent; its init container copies it into the pod.
	// Required.
	AgentImage string
	// TemplateImage names the image of a template whose Spec.RootFS is a
	// directory (<templates>/<name>/rootfs); default
	// "withruntime/template-<name>:latest". A Spec.RootFS that is not an
	// absolute path is itself the image reference (what registry.Catalog
	// gives the manager, pinned by digest) and is used as it is.
	TemplateImage func(template string) string
	// PullPolicy of both images; default IfNotPresent.
	PullPolicy corev1.PullPolicy
	// AgentPort is the TCP port the agent serves on in the pod; default 7000.
	AgentPort int
	// ReadyTimeout bounds how long Create waits for the pod to run and its
	// agent to answer (image pulls included); default 2 minutes.
	ReadyTimeout time.Duration
	// DeleteTimeout bounds how long Destroy waits for the kubelet to end
	// the pod before deleting it by force; default 30 seconds.
	DeleteTimeout time.Duration
	// MaxLease is the longest lease the server allows (its longest
	// timeoutSeconds); default 24 hours. Each pod's activeDeadlineSeconds
	// is MaxLease plus a minute from its create (or its claim, for a warm
	// pool's), since a running pod's deadline can never be raised: that is
	// the longest a sandbox lives, however its lease is extended
	// (LatestLeaseEnd).
	MaxLease time.Duration
	// ServerPeer is who may reach a sandbox's agent port: every sandbox's
	// NetworkPolicy lets in only it (default DefaultServerPeer(): the
	// Runtime server's pods as deploy/kubernetes/ labels them).
	ServerPeer networkingv1.NetworkPolicyPeer
	// DNSPeer is the cluster DNS a sandbox with internet on may query
	// (default DefaultDNSPeer()). Sandboxes without internet get no DNS.
	DNSPeer networkingv1.NetworkPolicyPeer
	// EgressProxy, when valid, is where sandbox pods reach Runtime's egress
	// proxy (package podproxy, served by the server's pods): an address,
	// so that no DNS is needed (the proxy Service's cluster IP) and its
	// port. With it, host names, wildcards and secrets are enforced: every
	// pod gets HTTP_PROXY and HTTPS_PROXY naming it and may reach
	// ServerPeer on EgressProxyPort. Without it they are refused.
	EgressProxy netip.AddrPort
	// EgressProxyPort is the port the server's pods serve the proxy on
	// (the Service's targetPort), which each sandbox's NetworkPolicy lets
	// out to ServerPeer. Default: EgressProxy's port.
	EgressProxyPort int
}

// Driver runs sandboxes as pods.
type Driver struct {
	cfg     Config
	pods    listersv1.PodLister
	stop    chan struct{}
	changed *broadcast

	mu      sync.Mutex
	known   map[string]state   // sandboxes made or recovered here, for Stats
	cpuSeen map[string]float64 // the last CPU seconds Stats reported, by sandbox
}

// state is what the manager persists for Recover: the pod's identity and
// the channel credentials (the token is never read back from the cluster).
type state struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	CertPEM   []byte `json:"cert"`
	Token     string `json:"token"`
}

// New checks the configuration and starts the pod informer; it returns once
// the informer has synced (or ctx ends).
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubernetes driver: no client")
	}
	if cfg.AgentImage == "" {
		return nil, errors.New("kubernetes driver: no agent image: set one holding the static agent at /withruntime-agent")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "withruntime"
	}
	if cfg.RuntimeClass == "" {
		cfg.RuntimeClass = "gvisor"
	}
	if cfg.TemplateImage == nil {
		cfg.TemplateImage = func(name string) string { return "withruntime/template-" + name + ":latest" }
	}
	if cfg.PullPolicy == "" {
		cfg.PullPolicy = corev1.PullIfNotPresent
	}
	if cfg.AgentPort == 0 {
		cfg.AgentPort = 7000
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	if cfg.DeleteTimeout == 0 {
		cfg.DeleteTimeout = 30 * time.Second
	}
	if cfg.MaxLease <= 0 {
		cfg.MaxLease = 24 * time.Hour
	}
	if cfg.ServerPeer.PodSelector == nil && cfg.ServerPeer.NamespaceSelector == nil && cfg.ServerPeer.IPBlock == nil {
		cfg.ServerPeer = DefaultServerPeer()
	}
	if cfg.EgressProxy.IsValid() && cfg.EgressProxyPort == 0 {
		cfg.EgressProxyPort = int(cfg.EgressProxy.Port())
	}
	if cfg.DNSPeer.PodSelector == nil && cfg.DNSPeer.NamespaceSelector == nil && cfg.DNSPeer.IPBlock == nil {
		cfg.DNSPeer = DefaultDNSPeer()
	}
	f := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelManagedBy + "=" + managedBy }))
	inf := f.Core().V1().Pods()
	d := &Driver{cfg: cfg, pods: inf.Lister(), stop: make(chan struct{}), changed: newBroadcast(),
		known: map[string]state{}, cpuSeen: map[string]float64{}}
	notify := func(any) { d.changed.notify() }
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
	}); err != nil {
		return nil, fmt.Errorf("kubernetes driver: %w", err)
	}
	f.Start(d.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		close(d.stop)
		return nil, fmt.Errorf("kubernetes driver: pod informer did not sync: %w", ctx.Err())
	}
	return d, nil
}

// Name implements driver.Driver.
func (d *Driver) Name() string { return "kubernetes" }

// SharedAcrossServers implements driver.Shared: every server on the cluster
// sees and reaches every sandbox pod (the namespace and its label).
func (d *Driver) SharedAcrossServers() {}

// Close implements driver.Closer: it stops the informer. Pods keep running.
func (d *Driver) Close() error {
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	return nil
}

// Create implements driver.Driver: the sandbox's NetworkPolicy (spec.Policy;
// nil: nothing out), a Secret with its credentials, then its Pod, so that
// the pod never runs unrestricted; it returns once the pod runs and its
// agent answers. A policy CheckNetwork refuses fails the create.
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (h *driver.Handle, err error) {
	if err := validID(spec.ID); err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}
	if len(spec.Volumes) > 0 {
		return nil, errors.New("kubernetes create: volumes are not supported by this driver yet")
	}
	valid := 24 * time.Hour
	if !spec.LeaseEndsAt.IsZero() {
		valid = time.Until(spec.LeaseEndsAt) + leaseBackstop + time.Hour
	}
	creds, err := agentauth.New(spec.ID, valid)
	if err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}
	defer func() {
		if err != nil {
			_ = d.Destroy(context.WithoutCancel(ctx), spec.ID)
		}
	}()
	if spec.Policy != nil {
		if err := d.CheckNetwork(*spec.Policy, 0); err != nil {
			return nil, err
		}
	}
	nps := d.cfg.Client.NetworkingV1().NetworkPolicies(d.cfg.Namespace)
	np, err := nps.Create(ctx, d.networkPolicy(spec, spec.Policy), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes create: network policy: %w", err)
	}
	core := d.cfg.Client.CoreV1()
	sec, err := core.Secrets(d.cfg.Namespace).Create(ctx, d.secret(spec, creds), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes create: secret: %w", err)
	}
	image := d.image(spec.RootFS)
	pod, err := core.Pods(d.cfg.Namespace).Create(ctx, d.pod(spec, image, time.Now()), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes create: pod: %w", err)
	}
	// The secret and the policy go with the pod wherever a garbage
	// collector runs.
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	sec.OwnerReferences = owner
	if _, err := core.Secrets(d.cfg.Namespace).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("kubernetes create: secret owner: %w", err)
	}
	np.OwnerReferences = owner
	if _, err := nps.Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("kubernetes create: network policy owner: %w", err)
	}
	st := state{Namespace: d.cfg.Namespace, Pod: pod.Name, UID: string(pod.UID), CertPEM: creds.CertPEM, Token: creds.Token}
	wctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	if err := d.waitRunning(wctx, st); err != nil {
		return nil, fmt.Errorf("kubernetes create: %w", err)
	}
	dial := d.dialer(st)
	if err := waitReady(wctx, dial); err != nil {
		return nil, fmt.Errorf("kubernetes create: agent did not answer: %w", err)
	}
	raw, _ := json.Marshal(st)
	d.remember(spec.ID, st)
	return &driver.Handle{ID: spec.ID, State: raw, Dial: dial}, nil
}

// waitRunning waits until the pod runs and has an IP; a pod that ended or
// cannot pull its images fails at once with the reason.
func (d *Driver) waitRunning(ctx context.Context, st state) error {
	for {
		seen := d.changed.wait()
		pod, err := d.pods.Pods(st.Namespace).Get(st.Pod)
		switch {
		case apierrors.IsNotFound(err):
			// Not in the informer's cache yet.
		case err != nil:
			return err
		case string(pod.UID) != st.UID:
			return fmt.Errorf("pod %s was replaced", st.Pod)
		case pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "":
			return nil
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			return fmt.Errorf("pod %s ended before its agent answered: %s", st.Pod, describe(pod))
		default:
			if why := stuck(pod); why != "" {
				return fmt.Errorf("pod %s cannot start: %s", st.Pod, why)
			}
		}
		select {
		case <-ctx.Done():
			if pod != nil {
				return fmt.Errorf("pod %s not running (%s): %w", st.Pod, describe(pod), ctx.Err())
			}
			return fmt.Errorf("pod %s not running: %w", st.Pod, ctx.Err())
		case <-seen:
		}
	}
}

// stuck names a container state that will not get better by waiting.
func stuck(pod *corev1.Pod) string {
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return cs.Name + ": " + w.Reason + ": " + w.Message
			}
		}
	}
	return ""
}

func describe(pod *corev1.Pod) string {
	s := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		s += " " + pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Message != "" {
			s += "; not scheduled: " + c.Message
		}
	}
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if t := cs.State.Terminated; t != nil {
			s += fmt.Sprintf("; %s exited %d (%s)", cs.Name, t.ExitCode, t.Reason)
		}
	}
	return s
}

// dialer dials the pod's agent at its current IP, checking the pinned
// certificate and sending the token (agentauth.Dial).
func (d *Driver) dialer(st state) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		pod, err := d.pods.Pods(st.Namespace).Get(st.Pod)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("agent of pod %s: %w", st.Pod, driver.ErrNotFound)
			}
			return nil, err
		}
		if string(pod.UID) != st.UID || pod.Status.PodIP == "" {
			return nil, fmt.Errorf("agent of pod %s: pod replaced or without an IP: %w", st.Pod, driver.ErrNotFound)
		}
		if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			return nil, fmt.Errorf("agent of pod %s: the pod ended (%s): %w", st.Pod, describe(pod), driver.ErrNotFound)
		}
		return agentauth.Dial(ctx, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(d.cfg.AgentPort)), st.CertPEM, st.Token)
	}
}

// waitReady polls the agent's /health until it answers 200. A refused
// channel (another agent at that IP) or a pod that is gone or ended (e.g.
// its agent ended it at a lease that passed while it booted) fails at once.
func waitReady(ctx context.Context, dial func(context.Context) (net.Conn, error)) error {
	var last error
	for {
		if last = ping(ctx, dial); last == nil {
			return nil
		}
		if errors.Is(last, driver.ErrChannel) || errors.Is(last, driver.ErrNotFound) {
			return last
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, dial func(context.Context) (net.Conn, error)) error {
	client := http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent health: %s", resp.Status)
	}
	return nil
}

// checkPinned checks the credentials a stored state pins before any
// connection: a certificate made for sandbox id (agentauth.New names it)
// and a token of 64 hex digits. They come from the server's own store, never
// from the pod or the cluster; a state that does not hold them (written by
// something else) attaches to nothing.
func checkPinned(id string, st state) error {
	block, _ := pem.Decode(st.CertPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return fmt.Errorf("stored state pins no certificate: %w", driver.ErrChannel)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("stored certificate: %v: %w", err, driver.ErrChannel)
	}
	if cert.Subject.CommonName != id {
		return fmt.Errorf("stored certificate names %q, not this sandbox: %w", cert.Subject.CommonName, driver.ErrChannel)
	}
	if _, err := hex.DecodeString(st.Token); err != nil || len(st.Token) != 64 {
		return fmt.Errorf("stored token is not 64 hex digits: %w", driver.ErrChannel)
	}
	return nil
}

// Recover implements driver.Driver: the pod of the stored state, if it
// still runs (same UID) and its agent answers with the stored credentials.
func (d *Driver) Recover(ctx context.Context, id string, raw []byte) (*driver.Handle, error) {
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("kubernetes recover %s: bad state: %w", id, err)
	}
	if st.Pod != objectName(id) || st.Namespace != d.cfg.Namespace {
		return nil, fmt.Errorf("kubernetes recover %s: state names pod %s/%s: %w", id, st.Namespace, st.Pod, driver.ErrNotFound)
	}
	if err := checkPinned(id, st); err != nil {
		return nil, fmt.Errorf("kubernetes recover %s: %w: %w", id, err, driver.ErrNotFound)
	}
	pod, err := d.cfg.Client.CoreV1().Pods(st.Namespace).Get(ctx, st.Pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && (string(pod.UID) != st.UID || pod.Status.Phase != corev1.PodRunning) {
		return nil, fmt.Errorf("kubernetes recover %s: %w", id, driver.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes recover %s: %w", id, err)
	}
	dial := d.dialer(st)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitReady(pctx, dial); err != nil {
		return nil, fmt.Errorf("kubernetes recover %s: agent does not answer (%v): %w", id, err, driver.ErrNotFound)
	}
	d.remember(id, st)
	return &driver.Handle{ID: id, State: raw, Dial: dial}, nil
}

// Destroy implements driver.Driver: it deletes the pod (a one-second grace,
// then by force after DeleteTimeout), waits until the API no longer has
// it, and deletes its secret and its NetworkPolicy (last: the pod stays
// restricted until it is gone).
func (d *Driver) Destroy(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("kubernetes destroy: %w", err)
	}
	d.forget(id)
	name := objectName(id)
	pods := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace)
	grace := int64(1)
	err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes destroy %s: %w", id, err)
	}
	if err == nil {
		if err := d.waitGone(ctx, name); err != nil {
			zero := int64(0)
			if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("kubernetes destroy %s: force: %w", id, err)
			}
		}
	}
	err = d.cfg.Client.CoreV1().Secrets(d.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes destroy %s: secret: %w", id, err)
	}
	err = d.cfg.Client.NetworkingV1().NetworkPolicies(d.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes destroy %s: network policy: %w", id, err)
	}
	return nil
}

// waitGone waits until the API server no longer has pod name.
func (d *Driver) waitGone(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DeleteTimeout)
	defer cancel()
	for {
		_, err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// List implements driver.Driver: the sandbox ids of the driver's pods, of
// its secrets and of its NetworkPolicy objects (a create that died between
// them leaves a policy or a secret).
func (d *Driver) List(ctx context.Context) ([]string, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: managedBy})
	seen := map[string]bool{}
	pods, err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("kubernetes list: %w", err)
	}
	for _, p := range pods.Items {
		seen[p.Labels[LabelSandbox]] = true
	}
	secs, err := d.cfg.Client.CoreV1().Secrets(d.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("kubernetes list: %w", err)
	}
	for _, s := range secs.Items {
		seen[s.Labels[LabelSandbox]] = true
	}
	nps, err := d.cfg.Client.NetworkingV1().NetworkPolicies(d.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("kubernetes list: %w", err)
	}
	for _, np := range nps.Items {
		seen[np.Labels[LabelSandbox]] = true
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		if validID(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Wait implements driver.Watcher: it returns when the sandbox's pod has
// ended (failed, succeeded, deleted, or its deadline passed); a container
// the kubelet killed for memory says OutOfMemory.
func (d *Driver) Wait(ctx context.Context, id string) (driver.Exit, error) {
	name := objectName(id)
	for {
		seen := d.changed.wait()
		pod, err := d.pods.Pods(d.cfg.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return driver.Exit{Detail: "pod deleted"}, nil
		}
		if err != nil {
			return driver.Exit{}, err
		}
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			return exitOf(pod), nil
		}
		select {
		case <-ctx.Done():
			return driver.Exit{}, ctx.Err()
		case <-seen:
		}
	}
}

func exitOf(pod *corev1.Pod) driver.Exit {
	ex := driver.Exit{Detail: describe(pod)}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.Reason == "OOMKilled" {
			ex.OutOfMemory = true
		}
	}
	return ex
}
