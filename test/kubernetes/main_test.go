// Package kubernetes_test runs Runtime's main job through a server whose
// driver is Kubernetes, against a real control plane (etcd, kube-apiserver,
// kube-scheduler from scripts/k8s-bins.sh) and a node: with
// WITHRUNTIME_K8S_NODE=real a real one (internal/kube/kubetest/realnode:
// kubelet, containerd, gVisor's shim, CNI bridge, in the test's own network
// namespace), otherwise a TEST DOUBLE (internal/kube/kubetest/fakenode: pods
// run as host processes, no isolation). Run it with
// scripts/test-kubernetes.sh [--real-node].
package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"withruntime.dev/runtime/internal/kube/kubetest"
	"withruntime.dev/runtime/internal/kube/kubetest/fakenode"
	"withruntime.dev/runtime/internal/kube/kubetest/realnode"
)

const ns = "withruntime"

func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v: %s", pkg, err, b)
	}
	return out
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// server is `withruntime serve --driver kubernetes` on a control plane and
// a node, with its namespace and RuntimeClasses.
type server struct {
	c            *kubetest.Cluster
	wr           string // the withruntime binary
	addr         string // host:port of the API
	key          string // the local key
	data         string // the data directory
	nodeDir      string // the fake node's pod directories ("" on a real node)
	runtimeClass string
	templates    string
	images       images
	running      func() int // containers or processes still on the node
	extraArgs    []string   // more serve flags
	stop         func()     // stops the server (start starts it again)
	kill         func()     // kills the server at once (SIGKILL), as a crash would
}

// startServer starts a control plane, a node (WITHRUNTIME_K8S_NODE) and
// the server; everything stops when the test ends.
func startServer(t *testing.T, extraArgs ...string) *server {
	s := prepareServer(t, extraArgs...)
	s.start(t)
	return s
}

// prepareServer is startServer without starting the server.
func prepareServer(t *testing.T, extraArgs ...string) *server {
	templates := os.Getenv("WITHRUNTIME_TEMPLATES_DIR")
	if templates == "" {
		templates = "/var/lib/withruntime/templates"
	}
	if _, err := os.Stat(filepath.Join(templates, "base", "rootfs")); err != nil {
		t.Skipf("no base template in %s (the server checks templates exist; scripts/install.sh --template builds it)", templates)
	}
	c := kubetest.Start(t, kubetest.Options{Scheduler: true})
	ctx := context.Background()
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for name, handler := range map[string]string{"gvisor": "runsc", "runc": "runc"} {
		if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// WITHRUNTIME_K8S_RUNTIME_CLASS=runc runs the pods under runc instead of
	// gVisor: only for a real node on a host where gVisor's shim cannot run
	// (see docs/ARCHITECTURE.md, Kubernetes); never what Runtime deploys.
	runtimeClass := os.Getenv("WITHRUNTIME_K8S_RUNTIME_CLASS")
	if runtimeClass == "" {
		runtimeClass = "gvisor"
	}
	bin := t.TempDir()
	agent := build(t, bin, "withruntime.dev/runtime/cmd/withruntime-agent")
	wr := build(t, bin, "withruntime.dev/runtime/cmd/withruntime")
	nodeDir := ""
	if os.Getenv("WITHRUNTIME_K8S_NODE") != "real" {
		nodeDir = t.TempDir()
	}
	imgs := pushImages(t, wr, agent, templates)
	running := startNode(t, c, imgs, agent, bin, nodeDir)

	s := &server{c: c, wr: wr, addr: freeAddr(t), data: t.TempDir(), nodeDir: nodeDir, runtimeClass: runtimeClass,
		running: running, templates: templates, images: imgs, extraArgs: extraArgs}
	return s
}

// images are what the tests pushed to their registry on loopback.
type images struct {
	registry string // host:port
	prefix   string // --kubernetes-template-image-prefix
	base     string // the base template's image, pinned by digest
	agent    string // the agent's image, pinned by digest
}

var (
	pushOnce   sync.Once
	pushed     images
	pushFailed string
	pushDirs   []string // removed by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range pushDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// pushImages serves a registry on loopback (once per test binary; it lives
// as long as the binary) and pushes to it, with `withruntime template push`
// and `template push-agent`, the agent and the base template: on a real
// node the real one, whose image the node pulls; on the test double of a
// node, which pulls nothing, a small stand-in with an environment of its
// own, so that what the server reads from the registry is seen.
func pushImages(t *testing.T, wr, agent, templates string) images {
	t.Helper()
	pushOnce.Do(func() {
		blobs, err := os.MkdirTemp("", "wr-k8s-registry-")
		if err != nil {
			pushFailed = err.Error()
			return
		}
		pushDirs = append(pushDirs, blobs)
		reg := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)),
			ggcrregistry.WithBlobHandler(ggcrregistry.NewDiskBlobHandler(blobs))))
		pushed.registry = strings.TrimPrefix(reg.URL, "http://")
		pushed.prefix = pushed.registry + "/withruntime/template-"
		if os.Getenv("WITHRUNTIME_K8S_NODE") != "real" {
			if templates, err = standInTemplates(); err != nil {
				pushFailed = err.Error()
				return
			}
			pushDirs = append(pushDirs, templates)
		}
		run := func(args ...string) string {
			start := time.Now()
			out, err := exec.Command(wr, args...).Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				pushFailed += fmt.Sprintf("withruntime %s: %v: %s\n", strings.Join(args, " "), err, stderr)
			}
			log.Printf("withruntime %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
			return strings.TrimSpace(string(out))
		}
		pushed.base = run("template", "push", "base", "--image", pushed.prefix+"base", "--templates-dir", templates)
		pushed.agent = run("template", "push-agent", "--image", pushed.registry+"/withruntime/agent:test", "--agent", agent)
	})
	if pushFailed != "" {
		t.Fatal(pushFailed)
	}
	return pushed
}

// standInEnv is the environment of the stand-in base template.
const standInEnv = "WITHRUNTIME_TEST_TEMPLATE=from-the-registry"

// standInTemplates makes a templates directory whose base is a small
// stand-in (for the test double of a node, which runs no image).
func standInTemplates() (string, error) {
	dir, err := os.MkdirTemp("", "wr-k8s-templates-")
	if err != nil {
		return "", err
	}
	root := filepath.Join(dir, "base", "rootfs", "etc")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(root, "hostname"), []byte("stand-in\n"), 0o644); err != nil {
		return "", err
	}
	info := fmt.Sprintf(`{"name":"base","createdAt":"2026-12-01T00:00:00Z","packages":[],"origin":{"image":"stand-in","env":[%q],"shell":"/bin/sh"}}`, standInEnv)
	return dir, os.WriteFile(filepath.Join(dir, "base", "template.json"), []byte(info), 0o644)
}

// start starts `withruntime serve` (stopped by stop, or at the test's end)
// and waits until it answers.
func (s *server) start(t *testing.T) {
	t.Helper()
	var serveLog bytes.Buffer
	serve := exec.Command(s.wr, "serve", "--driver", "kubernetes", "--kubeconfig", s.c.Kubeconfig,
		"--kubernetes-agent-image", s.images.agent, "--kubernetes-template-image-prefix", s.images.prefix,
		"--kubernetes-runtime-class", s.runtimeClass, "--listen", s.addr, "--data-dir", s.data, "--pool-size", "0")
	serve.Args = append(serve.Args, s.extraArgs...)
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { serve.Wait(); close(served) }()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			serve.Process.Signal(syscall.SIGTERM)
			select {
			case <-served:
			case <-time.After(10 * time.Second):
				serve.Process.Kill()
				<-served
			}
			if t.Failed() {
				t.Logf("server log:\n%s", serveLog.String())
			}
		})
	}
	s.kill = func() {
		once.Do(func() {
			serve.Process.Kill()
			<-served
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("log of the server killed:\n%s", serveLog.String())
				}
			})
		})
	}
	t.Cleanup(s.stop)
	s.key = waitServer(t, s.addr, s.data, served)
}

// TestMainJobPrints42 is the README's main job, `withruntime sandbox run --
// python3 -c 'print(6*7)'`, through `withruntime serve --driver kubernetes`:
// it prints 42, and nothing of the sandbox is left in the cluster after.
func TestMainJobPrints42(t *testing.T) {
	s := startServer(t)
	wr, addr, key, runtimeClass := s.wr, s.addr, s.key, s.runtimeClass
	run := exec.Command(wr, "sandbox", "run", "--", "python3", "-c", "print(6*7)")
	run.Env = append(os.Environ(), "WITHRUNTIME_URL=http://"+addr, "WITHRUNTIME_API_KEY="+key)
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	start := time.Now()
	if err := run.Run(); err != nil {
		t.Fatalf("sandbox run: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	t.Logf("sandbox run (create pod, run, destroy): %v", time.Since(start).Round(time.Millisecond))
	if got := stdout.String(); got != "42\n" {
		t.Fatalf("stdout %q, want \"42\\n\" (stderr: %s)", got, stderr.String())
	}

	// On a real node with the gvisor class the command really ran under
	// gVisor: its kernel log is the sentry's.
	if os.Getenv("WITHRUNTIME_K8S_NODE") == "real" && runtimeClass == "gvisor" {
		dmesg := exec.Command(wr, "sandbox", "run", "--", "dmesg")
		dmesg.Env = run.Env
		out, err := dmesg.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "gVisor") {
			t.Fatalf("dmesg in the sandbox: %v: %q, want gVisor's kernel log", err, out)
		}
	}

	checkTemplateFromRegistry(t, s)
	checkHostileTemplateImages(t, s)
	checkNetworkPolicies(t, s)
	assertNothingLeft(t, s)
}

// checkTemplateFromRegistry: the server, which has no template directory,
// found the base template in the registry: its pod names the image pushed,
// pinned by digest, and (on the test double, whose stand-in template has an
// environment) its sandbox starts with the environment the image's config
// carries.
func checkTemplateFromRegistry(t *testing.T, s *server) {
	t.Helper()
	api := "http://" + s.addr
	status, b := call(t, "POST", api+"/v1/sandboxes", s.key, `{"template": "base"}`)
	if status/100 != 2 {
		t.Fatalf("create: %d %s", status, b)
	}
	var sb struct{ ID string }
	if err := json.Unmarshal(b, &sb); err != nil || sb.ID == "" {
		t.Fatalf("create answer %s: %v", b, err)
	}
	pod, err := s.c.Client.CoreV1().Pods(ns).Get(context.Background(), "wr-"+strings.ReplaceAll(sb.ID, "_", "-"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Image; got != s.images.base || !strings.Contains(got, "@sha256:") {
		t.Errorf("the sandbox's image is %q, want the pushed %q", got, s.images.base)
	}
	if got := pod.Spec.InitContainers[0].Image; got != s.images.agent {
		t.Errorf("the agent's image is %q, want the pushed %q", got, s.images.agent)
	}
	if s.nodeDir != "" {
		status, b = call(t, "POST", api+"/v1/sandboxes/"+sb.ID+"/exec", s.key, `{"command": "echo $WITHRUNTIME_TEST_TEMPLATE"}`)
		if status != http.StatusOK || !bytes.Contains(b, []byte("from-the-registry")) {
			t.Errorf("exec: %d %s, want the stand-in template's environment", status, b)
		}
	}
	if status, b := call(t, "DELETE", api+"/v1/sandboxes/"+sb.ID, s.key, ""); status/100 != 2 {
		t.Fatalf("delete: %d %s", status, b)
	}

	// The template API answers from the registry too: `template ls` lists
	// base, GET answers its template.json, a delete is refused with 409.
	ls := exec.Command(s.wr, "template", "ls")
	ls.Env = append(os.Environ(), "WITHRUNTIME_URL="+api, "WITHRUNTIME_API_KEY="+s.key)
	if out, err := ls.CombinedOutput(); err != nil || !regexp.MustCompile(`(?m)^base\s`).Match(out) {
		t.Errorf("template ls: %v: %s, want base listed", err, out)
	}
	if status, b := call(t, "GET", api+"/v1/templates/base", s.key, ""); status != http.StatusOK || !bytes.Contains(b, []byte(`"name":"base"`)) {
		t.Errorf("GET /v1/templates/base: %d %s", status, b)
	}
	if status, b := call(t, "DELETE", api+"/v1/templates/base", s.key, ""); status != http.StatusConflict || !bytes.Contains(b, []byte("template push")) {
		t.Errorf("DELETE /v1/templates/base: %d %s, want 409 saying to push", status, b)
	}
}

// checkHostileTemplateImages: images in the registry that are not sane
// template images (one claiming to be another template, one with a config
// of megabytes) are refused at create with 400 and a message saying what
// is wrong; the server goes on serving.
func checkHostileTemplateImages(t *testing.T, s *server) {
	t.Helper()
	api := "http://" + s.addr
	layer, err := random.Layer(64, types.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	for tname, labels := range map[string]map[string]string{
		"liar": {"dev.withruntime.template": "base", "dev.withruntime.template.info": `{"origin":{"env":["EVIL=1"]}}`},
		"huge": {"dev.withruntime.template": "huge", "dev.withruntime.template.info": strings.Repeat(" ", 4<<20) + "{}"},
	} {
		img, err := mutate.AppendLayers(empty.Image, layer)
		if err == nil {
			img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: "amd64", Config: v1.Config{Labels: labels}})
		}
		if err != nil {
			t.Fatal(err)
		}
		tag, err := name.NewTag(s.images.prefix + tname + ":latest")
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(tag, img); err != nil {
			t.Fatal(err)
		}
	}
	for tname, want := range map[string]string{"liar": `not of \"liar\"`, "huge": "a template's is 1 to", "absent": "template push absent"} {
		status, b := call(t, "POST", api+"/v1/sandboxes", s.key, `{"template": "`+tname+`"}`)
		if status != http.StatusBadRequest || !bytes.Contains(b, []byte(want)) {
			t.Errorf("create from %s: %d %s, want 400 saying %s", tname, status, b, want)
		}
	}
	if status, b := call(t, "GET", api+"/v1/health", s.key, ""); status != http.StatusOK {
		t.Fatalf("health after hostile images: %d %s", status, b)
	}
	// The list leaves out the images that are not sane templates.
	if status, b := call(t, "GET", api+"/v1/templates", s.key, ""); status != http.StatusOK || bytes.Contains(b, []byte("liar")) || bytes.Contains(b, []byte("huge")) || !bytes.Contains(b, []byte(`"name":"base"`)) {
		t.Errorf("GET /v1/templates after hostile images: %d %s, want base alone", status, b)
	}
}

// assertNothingLeft waits until nothing of any sandbox is left: no pod, no
// secret, no network policy, no process.
func assertNothingLeft(t *testing.T, s *server) {
	t.Helper()
	c, running, ctx := s.c, s.running, context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secs, err := c.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=withruntime"})
		if err != nil {
			t.Fatal(err)
		}
		nps, err := c.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 && len(secs.Items) == 0 && len(nps.Items) == 0 && running() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after the run: %d pods, %d secrets, %d network policies, %d running containers or processes on the node",
				len(pods.Items), len(secs.Items), len(nps.Items), running())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitServer waits until the server answers and returns its local key.
func waitServer(t *testing.T, addr, data string, served <-chan struct{}) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-served:
			t.Fatal("withruntime serve exited")
		default:
		}
		b, err := os.ReadFile(filepath.Join(data, "local.key"))
		if err == nil {
			if resp, err := http.Get("http://" + addr + "/v1/health"); err == nil {
				resp.Body.Close()
				return strings.TrimSpace(string(b))
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("withruntime serve did not answer in 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startNode starts the node the environment asks for and returns what
// counts the sandboxes' containers (or processes) still on it. A real
// node pulls the agent's and the template's images from imgs.registry
// (plain HTTP); only the pause image is imported.
func startNode(t *testing.T, c *kubetest.Cluster, imgs images, agent, bin, nodeDir string) func() int {
	if os.Getenv("WITHRUNTIME_K8S_NODE") == "real" {
		pause := build(t, bin, "withruntime.dev/runtime/internal/kube/kubetest/realnode/pause")
		pauseRoot := filepath.Join(bin, "pause-image")
		if err := os.MkdirAll(pauseRoot, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(pause, filepath.Join(pauseRoot, filepath.Base(pause))); err != nil {
			t.Fatal(err)
		}
		node := realnode.Start(t, c, []realnode.Image{
			{Ref: "withruntime/pause:test", Root: pauseRoot, Entrypoint: []string{"/pause"}},
		}, imgs.registry)
		return func() int {
			n, err := node.Running()
			if err != nil {
				t.Logf("running containers: %v", err)
				return -1
			}
			return n
		}
	}
	node, err := fakenode.Start(context.Background(), fakenode.Config{Client: c.Client, Dir: nodeDir,
		Binaries: map[string]string{"/withruntime-agent": agent},
		MainArgs: func(dir string) []string {
			return []string{"-user", "root", "-workspace", filepath.Join(dir, "workspace")}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	return node.Running
}
