package kubernetes

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"withruntime.dev/runtime/internal/agentauth"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/egress/podproxy"
)

// Labels on every object the driver makes.
const (
	// LabelManagedBy is "withruntime" on every pod and secret of the driver.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelSandbox is the sandbox id.
	LabelSandbox = "withruntime.dev/sandbox"
	// LabelOwner is the tenant (the API key id that created the sandbox;
	// "" for a warm-pool sandbox not yet claimed).
	LabelOwner = "withruntime.dev/owner"
	managedBy  = "withruntime"
)

// Paths inside the pod.
const (
	agentDir       = "/withruntime"                  // the agent, copied by the init container
	credentialsDir = "/run/withruntime/credentials"  // the sandbox's channel credentials (a Secret)
	agentPath      = agentDir + "/withruntime-agent" // PID 1 of the sandbox container
	mainContainer  = "sandbox"                       // the container whose PID 1 is the agent
	initContainer  = "agent-install"                 // copies the agent into agentDir
	imageAgentPath = "/withruntime-agent"            // the agent in Config.AgentImage
	trustFile      = "trust.crt"                     // Spec.TrustPEM, in the credentials secret
)

// noProxy is the pods' NO_PROXY: their own loopback only.
const noProxy = "localhost,127.0.0.1,::1"

// leaseBackstop is added to the latest lease end when setting
// activeDeadlineSeconds: the server ends the sandbox at its lease, the
// agent a few seconds later (agent.LeaseGrace), and Kubernetes only after
// both failed.
const leaseBackstop = time.Minute

// deadlineSeconds is the activeDeadlineSeconds (counted from start, at
// least 1) of a pod whose lease may end as late as end: end plus
// leaseBackstop.
//
// end is not the create's lease but the longest one the server allows
// (Config.MaxLease) from the create or claim: Kubernetes never lets a
// running pod's deadline be raised, so a deadline at the first lease would
// kill the pod of every sandbox whose lease a set_timeout extended while
// Runtime still thinks it runs. The real lease is the server's timer and
// the agent's backstop; the deadline is the last resort and the longest a
// sandbox can live, which LatestLeaseEnd reports so that the manager
// refuses an extension past it.
func deadlineSeconds(end, start time.Time) *int64 {
	secs := max(1, int64(math.Ceil(end.Add(leaseBackstop).Sub(start).Seconds())))
	return &secs
}

// podStart is when the kubelet started pod (activeDeadlineSeconds counts
// from there), or its creation before the kubelet said.
func podStart(pod *corev1.Pod) time.Time {
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return pod.CreationTimestamp.Time
}

// objectName is the pod's and the secret's name for sandbox id: ids are
// [a-z0-9_-], names DNS labels, so '_' becomes '-'.
func objectName(id string) string { return "wr-" + strings.ReplaceAll(id, "_", "-") }

// validID says whether id can be a sandbox id here.
func validID(id string) error {
	if id == "" || len(id) > 50 {
		return fmt.Errorf("sandbox id %q: want 1 to 50 characters", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("sandbox id %q: want only a-z, 0-9, '_' and '-'", id)
		}
	}
	return nil
}

// ownerLabel turns a tenant id into a label value (at most 63 characters of
// [A-Za-z0-9_.-], starting and ending alphanumeric); anything else is
// replaced by '_' and cut.
func ownerLabel(owner string) string {
	b := []byte(owner)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	s := strings.Trim(string(b), "_.-")
	if len(s) > 63 {
		s = strings.Trim(s[:63], "_.-")
	}
	return s
}

func (d *Driver) labels(spec driver.Spec) map[string]string {
	return map[string]string{LabelManagedBy: managedBy, LabelSandbox: spec.ID, LabelOwner: ownerLabel(spec.Owner)}
}

// image is the image of a sandbox whose Spec.RootFS is rootfs: rootfs
// itself when it is an image reference (not an absolute path), else the
// image Config.TemplateImage names for its template.
func (d *Driver) image(rootfs string) string {
	if !filepath.IsAbs(rootfs) {
		return rootfs
	}
	return d.cfg.TemplateImage(templateName(rootfs))
}

// templateName is the template of a root filesystem directory
// (<templates>/<name>/rootfs).
func templateName(rootfs string) string {
	return filepath.Base(filepath.Dir(filepath.Clean(rootfs)))
}

// secret is the sandbox's channel credentials as the agent reads them.
func (d *Driver) secret(spec driver.Spec, c agentauth.Credentials) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(spec.ID), Namespace: d.cfg.Namespace, Labels: d.labels(spec)},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			agentauth.CertFile: c.CertPEM, agentauth.KeyFile: c.KeyPEM, agentauth.TokenFile: []byte(c.Token),
		},
	}
	if len(spec.TrustPEM) > 0 {
		s.Data[trustFile] = spec.TrustPEM
	}
	return s
}

// proxyEnv is the environment that points a pod's programs at the egress
// proxy (both spellings: tools read one or the other), without the
// variables the create set itself; nil without the proxy.
func (d *Driver) proxyEnv(spec driver.Spec) []corev1.EnvVar {
	if !d.cfg.EgressProxy.IsValid() {
		return nil
	}
	set := map[string]bool{}
	for _, kv := range spec.Env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	url := podproxy.ProxyURL(d.cfg.EgressProxy)
	var env []corev1.EnvVar
	for _, kv := range [][2]string{
		{"HTTP_PROXY", url}, {"HTTPS_PROXY", url}, {"http_proxy", url}, {"https_proxy", url},
		{"NO_PROXY", noProxy}, {"no_proxy", noProxy},
	} {
		if !set[kv[0]] {
			env = append(env, corev1.EnvVar{Name: kv[0], Value: kv[1]})
		}
	}
	return env
}

// pod is the sandbox's pod: the template's image with the agent as PID 1,
// requests equal to limits (Guaranteed), the longest lease as its deadline.
func (d *Driver) pod(spec driver.Spec, image string, now time.Time) *corev1.Pod {
	name := objectName(spec.ID)
	cpu := resource.NewMilliQuantity(int64(math.Ceil(spec.CPU*1000)), resource.DecimalSI)
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *cpu,
		corev1.ResourceMemory: *resource.NewQuantity(spec.MemoryBytes, resource.BinarySI),
	}
	if spec.DiskBytes > 0 {
		res[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(spec.DiskBytes, resource.BinarySI)
	}
	args := []string{
		"-listen-tcp", ":" + strconv.Itoa(d.cfg.AgentPort),
		"-credentials", credentialsDir,
		"-memory-bytes", strconv.FormatInt(spec.MemoryBytes, 10),
	}
	if spec.PidsLimit > 0 {
		args = append(args, "-pids-limit", strconv.FormatInt(spec.PidsLimit, 10))
	}
	if len(spec.TrustPEM) > 0 {
		args = append(args, "-trust", credentialsDir+"/"+trustFile)
	}
	var deadline *int64
	if !spec.LeaseEndsAt.IsZero() {
		args = append(args, "-lease-ends-at", strconv.FormatInt(spec.LeaseEndsAt.Unix(), 10))
		if !spec.Pooled {
			deadline = deadlineSeconds(now.Add(d.cfg.MaxLease), now)
		}
		// A pooled pod gets its deadline when a create claims it (Claim):
		// the API lets a running pod's activeDeadlineSeconds be added or
		// lowered, never raised, and the claim's lease is not known yet.
	}
	env := d.proxyEnv(spec)
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	root := int64(0)
	no := false
	mode := int32(0o400)
	tmp, shm := memoryDir(spec.TmpBytes), memoryDir(spec.ShmBytes)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.cfg.Namespace, Labels: d.labels(spec)},
		Spec: corev1.PodSpec{
			RuntimeClassName:             &d.cfg.RuntimeClass,
			RestartPolicy:                corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:        deadline,
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			Hostname:                     name,
			InitContainers: []corev1.Container{{
				Name: initContainer, Image: d.cfg.AgentImage, ImagePullPolicy: d.cfg.PullPolicy,
				Command:      []string{imageAgentPath, "-install", agentDir},
				VolumeMounts: []corev1.VolumeMount{{Name: "agent", MountPath: agentDir}},
				Resources:    corev1.ResourceRequirements{Requests: res, Limits: res},
			}},
			Containers: []corev1.Container{{
				Name: mainContainer, Image: image, ImagePullPolicy: d.cfg.PullPolicy,
				Command: []string{agentPath}, Args: args, Env: env,
				Ports:     []corev1.ContainerPort{{Name: "agent", ContainerPort: int32(d.cfg.AgentPort), Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
				// The agent starts as root and runs commands as the
				// template's user; inside gVisor root is the sandbox's.
				SecurityContext: &corev1.SecurityContext{RunAsUser: &root, RunAsGroup: &root},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "agent", MountPath: agentDir, ReadOnly: true},
					{Name: "credentials", MountPath: credentialsDir, ReadOnly: true},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "shm", MountPath: "/dev/shm"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: name, DefaultMode: &mode}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: tmp}},
				{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: shm}},
			},
		},
	}
}

// memoryDir is a memory-backed emptyDir of at most size bytes (0: no size
// set), for /tmp and /dev/shm: its pages count in the pod's memory, as a
// tmpfs does in a gVisor sandbox's. (kubelet makes emptyDirs 0777.)
func memoryDir(size int64) *corev1.EmptyDirVolumeSource {
	dir := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	if size > 0 {
		dir.SizeLimit = resource.NewQuantity(size, resource.BinarySI)
	}
	return dir
}
