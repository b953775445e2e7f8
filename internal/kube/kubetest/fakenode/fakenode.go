// Package fakenode is a TEST DOUBLE of a Kubernetes node, for tests only:
// never use it in production code. It registers a node through
// virtual-kubelet and "runs" each pod scheduled to it as host processes:
// no image is pulled, no isolation applies (a pod's processes run as the
// test, root), and no CNI gives it a network. It exists because a real node
// (kubelet, containerd, containerd-shim-runsc-v1, CNI) could not be brought
// up on the test host; see docs/ARCHITECTURE.md, "Kubernetes".
//
// What it does to run a pod, so that the Runtime agent inside really serves:
//   - each pod gets its own loopback address 127.B.X.Y as its pod IP, B
//     chosen per node from the process id, so that the nodes of test
//     processes running at the same time (go test runs packages in
//     parallel) do not hand out the same addresses;
//   - emptyDir volumes are directories under the node's directory, secret
//     volumes directories holding the secret's keys (mode 0400);
//   - init containers, then the first container, run as processes (the
//     first container in a PID namespace of its own): the command's
//     first word is looked up in Config.Binaries (a path in the image) or
//     under a volume mount; every argument that starts with a mount path
//     is rewritten to the host directory, and an argument ":PORT" becomes
//     "POD-IP:PORT"; Config.MainArgs are appended to the first container's;
//   - activeDeadlineSeconds is enforced (the pod fails DeadlineExceeded);
//   - a deleted pod's processes are killed and its directory removed.
package fakenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Config configures the double.
type Config struct {
	Client kubernetes.Interface
	// Name is the node's name; default "fakenode".
	Name string
	// Dir holds one directory per pod (volumes, logs).
	Dir string
	// Binaries maps a path inside an image to the host binary that stands
	// for it (e.g. "/withruntime-agent" of the agent image).
	Binaries map[string]string
	// MainArgs returns arguments appended to a pod's first container, given
	// the pod's host directory (e.g. the agent's -user and -workspace).
	MainArgs func(podDir string) []string
}

// Node is a running double.
type Node struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}
	prov   *provider
}

// Start registers the node and runs pods until ctx ends or Stop.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Name == "" {
		cfg.Name = "fakenode"
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &provider{cfg: cfg, pods: map[string]*fakePod{}, notify: func(*corev1.Pod) {},
		ipBase: 10 + (os.Getpid()+int(nodes.Add(1)))%240}
	n := &Node{cfg: cfg, cancel: cancel, done: make(chan struct{}), prov: p}
	nodeObj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Labels: map[string]string{"type": "fakenode", "kubernetes.io/hostname": cfg.Name}},
		Status: corev1.NodeStatus{
			Phase: corev1.NodeRunning,
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods: resource.MustParse("250"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "FakeNodeReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	nc, err := node.NewNodeController(node.NaiveNodeProvider{}, nodeObj, cfg.Client.CoreV1().Nodes())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("fakenode: %w", err)
	}
	podInf := informers.NewSharedInformerFactoryWithOptions(cfg.Client, time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.Name).String()
		}))
	other := informers.NewSharedInformerFactory(cfg.Client, time.Minute)
	bc := record.NewBroadcaster()
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient: cfg.Client.CoreV1(), PodInformer: podInf.Core().V1().Pods(),
		EventRecorder: bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: cfg.Name}),
		Provider:      p, ConfigMapInformer: other.Core().V1().ConfigMaps(), SecretInformer: other.Core().V1().Secrets(),
		ServiceInformer: other.Core().V1().Services(),
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("fakenode: %w", err)
	}
	podInf.Start(ctx.Done())
	other.Start(ctx.Done())
	go func() {
		defer close(n.done)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _ = nc.Run(ctx) }()
		go func() { defer wg.Done(); _ = pc.Run(ctx, 4) }()
		wg.Wait()
		bc.Shutdown()
		p.killAll()
	}()
	select {
	case <-nc.Ready():
	case <-time.After(30 * time.Second):
		n.Stop()
		return nil, errors.New("fakenode: node controller not ready in 30 s")
	}
	select {
	case <-pc.Ready():
	case <-time.After(30 * time.Second):
		n.Stop()
		return nil, errors.New("fakenode: pod controller not ready in 30 s")
	}
	return n, nil
}

// Stop ends the node: every pod's processes are killed.
func (n *Node) Stop() {
	n.cancel()
	<-n.done
}

// Running is the number of pods whose processes run now.
func (n *Node) Running() int { return n.prov.running() }

// nodes counts the nodes this process started (for their pod IPs).
var nodes atomic.Int64

// provider implements node.PodLifecycleHandler and node.PodNotifier.
type provider struct {
	cfg    Config
	mu     sync.Mutex
	pods   map[string]*fakePod // namespace/name
	nextIP int
	ipBase int // the second octet of this node's pod IPs
	notify func(*corev1.Pod)
}

type fakePod struct {
	pod  *corev1.Pod
	dir  string
	ip   string
	cmd  *exec.Cmd // the first container's process, nil before it starts
	stop chan struct{}
}

var _ node.PodNotifier = (*provider)(nil)

func key(ns, name string) string { return ns + "/" + name }

// NotifyPods implements node.PodNotifier.
func (p *provider) NotifyPods(_ context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
}

func (p *provider) setStatus(fp *fakePod, st corev1.PodStatus) {
	p.mu.Lock()
	fp.pod = fp.pod.DeepCopy()
	fp.pod.Status = st
	pod, notify := fp.pod.DeepCopy(), p.notify
	p.mu.Unlock()
	notify(pod)
}

// CreatePod implements node.PodLifecycleHandler.
func (p *provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	k := key(pod.Namespace, pod.Name)
	if _, ok := p.pods[k]; ok {
		p.mu.Unlock()
		return nil
	}
	p.nextIP++
	ip := fmt.Sprintf("127.%d.%d.%d", p.ipBase, 10+p.nextIP/250%240, 1+p.nextIP%250)
	fp := &fakePod{pod: pod.DeepCopy(), dir: filepath.Join(p.cfg.Dir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)), ip: ip,
		stop: make(chan struct{})}
	p.pods[k] = fp
	p.mu.Unlock()
	now := metav1.Now()
	p.setStatus(fp, corev1.PodStatus{Phase: corev1.PodPending, HostIP: "127.0.0.1", StartTime: &now})
	go p.run(ctx, fp)
	return nil
}

// run prepares the pod's volumes, runs its init containers then its first
// container, and reports what happens.
func (p *provider) run(ctx context.Context, fp *fakePod) {
	pod := fp.pod.DeepCopy()
	fail := func(reason, msg string) {
		now := metav1.Now()
		p.setStatus(fp, corev1.PodStatus{Phase: corev1.PodFailed, Reason: reason, Message: msg, HostIP: "127.0.0.1",
			PodIP: fp.ip, PodIPs: []corev1.PodIP{{IP: fp.ip}}, StartTime: &now})
	}
	vols, err := p.volumes(ctx, pod, fp.dir)
	if err != nil {
		fail("FakeNodeVolume", err.Error())
		return
	}
	for _, c := range pod.Spec.InitContainers {
		cmd, err := p.command(pod, c, vols, fp, false)
		if err != nil {
			fail("FakeNodeInit", err.Error())
			return
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			fail("FakeNodeInit", fmt.Sprintf("init container %s: %v: %s", c.Name, err, out))
			return
		}
	}
	if len(pod.Spec.Containers) == 0 {
		fail("FakeNodeNoContainer", "no container")
		return
	}
	c := pod.Spec.Containers[0]
	cmd, err := p.command(pod, c, vols, fp, true)
	if err != nil {
		fail("FakeNodeStart", err.Error())
		return
	}
	logf, err := os.Create(filepath.Join(fp.dir, c.Name+".log"))
	if err != nil {
		fail("FakeNodeStart", err.Error())
		return
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own PID namespace, as in a real pod: the Runtime agent is PID 1
	// there, and what it kills at its lease end (kill(-1)) is only the
	// pod's processes, never the test host's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWPID}
	p.mu.Lock()
	select {
	case <-fp.stop:
		p.mu.Unlock()
		return
	default:
	}
	err = cmd.Start()
	if err == nil {
		fp.cmd = cmd
	}
	p.mu.Unlock()
	if err != nil {
		fail("FakeNodeStart", err.Error())
		return
	}
	started := metav1.Now()
	running := func(state corev1.ContainerState, phase corev1.PodPhase, reason string) corev1.PodStatus {
		ready := corev1.ConditionTrue
		if phase != corev1.PodRunning {
			ready = corev1.ConditionFalse
		}
		return corev1.PodStatus{Phase: phase, Reason: reason, HostIP: "127.0.0.1", PodIP: fp.ip, PodIPs: []corev1.PodIP{{IP: fp.ip}},
			StartTime: &started,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: ready}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, Ready: phase == corev1.PodRunning, State: state}}}
	}
	p.setStatus(fp, running(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}, corev1.PodRunning, ""))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var deadline <-chan time.Time
	if s := pod.Spec.ActiveDeadlineSeconds; s != nil {
		deadline = time.After(time.Duration(*s) * time.Second)
	}
	reason := ""
	var werr error
	select {
	case werr = <-exited:
	case <-deadline:
		reason = "DeadlineExceeded"
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr = <-exited
	case <-fp.stop:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr = <-exited
	}
	code := int32(0)
	if ee, ok := werr.(*exec.ExitError); ok {
		code = int32(ee.ExitCode())
	}
	phase := corev1.PodSucceeded
	if code != 0 || werr != nil || reason != "" {
		phase = corev1.PodFailed
	}
	term := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reasonOr(reason, "Completed"),
		StartedAt: started, FinishedAt: metav1.Now()}}
	p.setStatus(fp, running(term, phase, reason))
}

func reasonOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// volumes makes the pod's volumes as host directories: mount name -> dir.
func (p *provider) volumes(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		d := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		switch {
		case v.EmptyDir != nil:
		case v.Secret != nil:
			sec, err := p.cfg.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("secret volume %s: %w", v.Name, err)
			}
			for k, b := range sec.Data {
				if err := os.WriteFile(filepath.Join(d, k), b, 0o400); err != nil {
					return nil, err
				}
			}
		default:
			return nil, fmt.Errorf("volume %s: only emptyDir and secret volumes are supported by the fake node", v.Name)
		}
		out[v.Name] = d
	}
	return out, nil
}

// command is container c as a host command, paths and ports rewritten.
func (p *provider) command(pod *corev1.Pod, c corev1.Container, vols map[string]string, fp *fakePod, main bool) (*exec.Cmd, error) {
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("container %s: no command (the fake node runs no image entrypoint)", c.Name)
	}
	rewrite := func(s string) string {
		for _, m := range c.VolumeMounts {
			if s == m.MountPath || strings.HasPrefix(s, m.MountPath+"/") {
				return vols[m.Name] + strings.TrimPrefix(s, m.MountPath)
			}
		}
		if len(s) > 1 && s[0] == ':' && strings.Trim(s[1:], "0123456789") == "" {
			return fp.ip + s
		}
		return s
	}
	bin, ok := p.cfg.Binaries[argv[0]]
	if !ok {
		bin = rewrite(argv[0])
		if bin == argv[0] {
			return nil, fmt.Errorf("container %s: %s is neither under a volume nor in Config.Binaries", c.Name, argv[0])
		}
	}
	args := make([]string, 0, len(argv))
	for _, a := range argv[1:] {
		args = append(args, rewrite(a))
	}
	if main && p.cfg.MainArgs != nil {
		args = append(args, p.cfg.MainArgs(fp.dir)...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Dir = fp.dir
	return cmd, nil
}

// UpdatePod implements node.PodLifecycleHandler (nothing changes in place).
func (p *provider) UpdatePod(context.Context, *corev1.Pod) error { return nil }

// DeletePod implements node.PodLifecycleHandler: kill, remove, report.
func (p *provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	fp, ok := p.pods[key(pod.Namespace, pod.Name)]
	if ok {
		delete(p.pods, key(pod.Namespace, pod.Name))
	}
	p.mu.Unlock()
	if !ok {
		return nil
	}
	p.stopPod(fp)
	now := metav1.Now()
	st := fp.pod.Status.DeepCopy()
	st.Phase = corev1.PodFailed
	st.Reason = "Deleted"
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Deleted", FinishedAt: now}}})
	}
	p.setStatus(fp, *st)
	return nil
}

func (p *provider) stopPod(fp *fakePod) {
	p.mu.Lock()
	select {
	case <-fp.stop:
	default:
		close(fp.stop)
	}
	cmd := fp.cmd
	p.mu.Unlock()
	if cmd != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for i := 0; i < 100 && syscall.Kill(cmd.Process.Pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	_ = os.RemoveAll(fp.dir)
}

func (p *provider) killAll() {
	p.mu.Lock()
	pods := make([]*fakePod, 0, len(p.pods))
	for _, fp := range p.pods {
		pods = append(pods, fp)
	}
	p.pods = map[string]*fakePod{}
	p.mu.Unlock()
	for _, fp := range pods {
		p.stopPod(fp)
	}
}

func (p *provider) running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, fp := range p.pods {
		if fp.cmd != nil {
			select {
			case <-fp.stop:
			default:
				if fp.cmd.ProcessState == nil {
					n++
				}
			}
		}
	}
	return n
}

// GetPod implements node.PodLifecycleHandler.
func (p *provider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fp, ok := p.pods[key(ns, name)]; ok {
		return fp.pod.DeepCopy(), nil
	}
	return nil, errNotFound(ns, name)
}

// GetPodStatus implements node.PodLifecycleHandler.
func (p *provider) GetPodStatus(ctx context.Context, ns, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods implements node.PodLifecycleHandler.
func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, fp := range p.pods {
		out = append(out, fp.pod.DeepCopy())
	}
	return out, nil
}
