// Package kubetest starts a real Kubernetes control plane on loopback for
// tests: etcd, kube-apiserver and (optionally) kube-scheduler, built from the
// Go module proxy by scripts/k8s-bins.sh. There is no controller-manager, so
// the harness does by hand what it would do (the `default` service account
// of each namespace it makes) and nothing garbage-collects: tests delete
// what they create.
//
// Tests that need it call Start, which skips the test with a message saying
// how to build the binaries when they are not there.
package kubetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// BinEnv names the directory of the binaries (what scripts/k8s-bins.sh
// prints). Without it, tests that need the control plane skip.
const BinEnv = "WITHRUNTIME_K8S_BIN"

// Options says what to start.
type Options struct {
	// Scheduler starts kube-scheduler too (pods get a node only with it).
	Scheduler bool
}

// Cluster is a running control plane.
type Cluster struct {
	// Config reaches the API server as an admin (group system:masters).
	Config *rest.Config
	// Client is a typed client on Config.
	Client kubernetes.Interface
	// Kubeconfig is a kubeconfig file for Config (for the scheduler and
	// other processes).
	Kubeconfig string
	// Dir holds the control plane's data and logs (kept on failure).
	Dir string
	// BinDir holds the binaries.
	BinDir string

	procs []*proc // in start order; stopped in reverse
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// FindBins returns the directory of the binaries named by BinEnv, or an
// error saying how to build them. The tests run only when BinEnv is set
// (scripts/test-kubernetes.sh sets it), so that a host which happens to
// have a build cached does not run them in its ordinary suite.
func FindBins() (string, error) {
	dir := os.Getenv(BinEnv)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: run scripts/test-kubernetes.sh, or export %s=$(scripts/k8s-bins.sh) (a cached build; the first takes minutes)", BinEnv, BinEnv)
	}
	for _, n := range []string{"etcd", "kube-apiserver", "kube-scheduler"} {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s=%s has no executable %s: run scripts/k8s-bins.sh", BinEnv, dir, n)
		}
	}
	return dir, nil
}

// Start starts the control plane, waits until the API server is ready and
// the `default` namespace has its service account, and stops everything
// when the test ends. It skips the test when the binaries are not built.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	bin, err := FindBins()
	if err != nil {
		t.Skip("kubetest: " + err.Error())
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, BinDir: bin}
	t.Cleanup(func() {
		c.Stop()
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("kubetest: control plane logs kept in %s", dir)
		}
	})
	if err := c.start(opts); err != nil {
		t.Fatalf("kubetest: %v (logs in %s)", err, dir)
	}
	return c
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) run(name string, args ...string) error {
	return c.Run(name, nil, filepath.Join(c.BinDir, name), args...)
}

// Run starts one more process of the cluster (a node's kubelet, its
// container runtime), logging to Dir/name.log, with env added to the
// test's environment. Stop stops it before what was started earlier.
func (c *Cluster) Run(name string, env []string, path string, args ...string) error {
	logf, err := os.Create(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and killed with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	c.procs = append(c.procs, p)
	return nil
}

func (c *Cluster) start(opts Options) error {
	ports := make([]int, 3)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := c.run("etcd", "--name", "kubetest", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "kubetest="+peerURL, "--log-level", "warn",
		"--unsafe-no-fsync"); err != nil { // a test's data need not survive a crash
		return err
	}
	p, err := newPKI(c.Dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "client-ca.crt"), p.caPEM, 0o600); err != nil {
		return err
	}
	apiPort := ports[2]
	if err := c.run("kube-apiserver",
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(apiPort),
		"--tls-cert-file", p.serverCert, "--tls-private-key-file", p.serverKey,
		"--client-ca-file", filepath.Join(c.Dir, "client-ca.crt"),
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", p.saPub,
		"--service-account-signing-key-file", p.saKey,
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--authorization-mode", "RBAC",
		// No controller-manager or node lifecycle controller: the endpoint
		// reconciler and the not-ready taint would wait for them forever.
		"--endpoint-reconciler-type", "none",
		"--disable-admission-plugins", "TaintNodesByCondition",
		"--allow-privileged=true",
	); err != nil {
		return err
	}
	c.Config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(apiPort),
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM, CertData: p.adminCertPEM, KeyData: p.adminKeyPEM},
		QPS:             100, Burst: 200,
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	if err := c.waitReady(60 * time.Second); err != nil {
		return err
	}
	if err := c.writeKubeconfig(p); err != nil {
		return err
	}
	if err := c.EnsureNamespace(context.Background(), "default"); err != nil {
		return err
	}
	if opts.Scheduler {
		if err := c.run("kube-scheduler", "--kubeconfig", c.Kubeconfig,
			"--authentication-kubeconfig", c.Kubeconfig, "--authorization-kubeconfig", c.Kubeconfig,
			"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0"); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		for _, p := range c.procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited: see %s.log", p.name, p.name)
			default:
			}
		}
		body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("API server not ready in %v: %v", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) writeKubeconfig(p *pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: p.adminCertPEM, ClientKeyData: p.adminKeyPEM}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin"}
	cfg.CurrentContext = "kubetest"
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	return clientcmd.WriteToFile(*cfg, c.Kubeconfig)
}

// EnsureNamespace creates namespace ns (if missing) and its `default`
// service account, which pods need and which no controller makes here.
func (c *Cluster) EnsureNamespace(ctx context.Context, ns string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("service account %s/default: %w", ns, err)
	}
	return nil
}

// Stop stops the scheduler, then the API server, then etcd (SIGTERM, then
// SIGKILL after 10 s each). It is safe to call twice.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	c.procs = nil
}
