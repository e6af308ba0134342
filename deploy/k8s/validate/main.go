// Command validate checks deploy/k8s/bench-job.yaml and deploy/k8s/daemonset.yaml offline,
// without an API server (`kubectl --dry-run=client` needs one).
//
// Every document of the multi-document YAML is decoded strictly into its typed object
// (v1 PersistentVolumeClaim, v1 Namespace, batch/v1 Job, apps/v1 DaemonSet): unknown fields,
// duplicate keys and wrongly-cased keys are errors, as with the API server's strict field
// validation. A file with Jobs is then checked for what running `cctl bench` shards needs
// (the shard Job and the merge Job); a file with a DaemonSet for what `cctl exporter` on
// every node needs (daemonset.go).
//
// Usage: go run . FILE.yaml   (prints "OK", or the errors and exits 1)
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The capabilities cctl bench needs: CAP_BPF or CAP_SYS_ADMIN plus CAP_NET_ADMIN for the
// loader (loader/src/kernel.rs), CAP_SYS_ADMIN for the testbed's `ip netns`.
var requiredCaps = []corev1.Capability{"BPF", "NET_ADMIN", "SYS_ADMIN"}

type manifest struct {
	pvcs       []*corev1.PersistentVolumeClaim
	jobs       []*batchv1.Job
	namespaces []*corev1.Namespace
	daemonSets []*appsv1.DaemonSet
}

// problems collects errors, each prefixed with the object it is about.
type problems []string

func (p *problems) add(obj, format string, args ...any) {
	*p = append(*p, obj+": "+fmt.Sprintf(format, args...))
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: validate FILE.yaml")
		os.Exit(2)
	}
	m, err := load(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	var p problems
	check(m, &p)
	if len(p) > 0 {
		for _, e := range p {
			fmt.Fprintln(os.Stderr, "error:", e)
		}
		fmt.Fprintf(os.Stderr, "%s: %d error(s)\n", os.Args[1], len(p))
		os.Exit(1)
	}
	fmt.Printf("%s: %d PersistentVolumeClaim(s), %d Job(s), %d Namespace(s), %d DaemonSet(s)\n",
		os.Args[1], len(m.pvcs), len(m.jobs), len(m.namespaces), len(m.daemonSets))
	fmt.Println("OK")
}

// load reads every document of path and decodes it strictly by apiVersion and kind.
func load(path string) (*manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	m := &manifest{}
	var errs []error
	for n := 1; ; n++ {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if err := m.decode(doc); err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", n, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(m.pvcs)+len(m.jobs)+len(m.namespaces)+len(m.daemonSets) == 0 {
		return nil, errors.New("no objects")
	}
	return m, nil
}

func (m *manifest) decode(doc []byte) error {
	js, err := yaml.YAMLToJSONStrict(doc) // rejects duplicate keys
	if err != nil {
		return err
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil // only comments
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return err
	}
	switch gvk := tm.APIVersion + "/" + tm.Kind; gvk {
	case "v1/PersistentVolumeClaim":
		var pvc corev1.PersistentVolumeClaim
		if err := strict(js, &pvc); err != nil {
			return fmt.Errorf("%s %q: %w", tm.Kind, name(js), err)
		}
		m.pvcs = append(m.pvcs, &pvc)
	case "batch/v1/Job":
		var job batchv1.Job
		if err := strict(js, &job); err != nil {
			return fmt.Errorf("%s %q: %w", tm.Kind, name(js), err)
		}
		m.jobs = append(m.jobs, &job)
	case "v1/Namespace":
		var ns corev1.Namespace
		if err := strict(js, &ns); err != nil {
			return fmt.Errorf("%s %q: %w", tm.Kind, name(js), err)
		}
		m.namespaces = append(m.namespaces, &ns)
	case "apps/v1/DaemonSet":
		var ds appsv1.DaemonSet
		if err := strict(js, &ds); err != nil {
			return fmt.Errorf("%s %q: %w", tm.Kind, name(js), err)
		}
		m.daemonSets = append(m.daemonSets, &ds)
	default:
		return fmt.Errorf("unexpected object apiVersion=%q kind=%q (want v1 PersistentVolumeClaim, v1 Namespace, batch/v1 Job or apps/v1 DaemonSet)", tm.APIVersion, tm.Kind)
	}
	return nil
}

// strict decodes js into obj, rejecting unknown fields (encoding/json's
// DisallowUnknownFields, case-insensitive like all of encoding/json) and then keys whose case
// differs from the field's (sigs.k8s.io/json, the API server's decoder, which is
// case-sensitive).
func strict(js []byte, obj any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the object")
	}
	strictErrs, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

func name(js []byte) string {
	var o struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(js, &o)
	return o.Metadata.Name
}

var (
	// --shard $((JOB_COMPLETION_INDEX+1))/N, spaces inside $(( )) allowed.
	shardRe  = regexp.MustCompile(`--shard[ =]"?\$\(\(\s*JOB_COMPLETION_INDEX\s*\+\s*1\s*\)\)/(\d+)`)
	resumeRe = regexp.MustCompile(`--resume[ =]"?/results/\S*shard-\$\(\(\s*JOB_COMPLETION_INDEX\s*\+\s*1\s*\)\)`)
	mergeRe  = regexp.MustCompile(`cctl bench merge\s+"?/results/\S*shard-\*.*--out[ =]"?/results/\S+`)
)

func check(m *manifest, p *problems) {
	if len(m.daemonSets) > 0 {
		checkExporter(m, p)
	}
	if len(m.jobs)+len(m.pvcs) > 0 {
		checkBenchManifest(m, p)
	}
}

// checkBenchManifest: the sweep's PVC, shard Job and merge Job (bench-job.yaml).
func checkBenchManifest(m *manifest, p *problems) {
	pvcs := map[string]*corev1.PersistentVolumeClaim{}
	for _, pvc := range m.pvcs {
		obj := "PersistentVolumeClaim " + pvc.Name
		pvcs[pvc.Name] = pvc
		if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
			p.add(obj, "accessModes %v lack ReadWriteMany (shard pods on different nodes share it)", pvc.Spec.AccessModes)
		}
		if _, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
			p.add(obj, "no resources.requests.storage")
		}
	}
	var bench, merge []*batchv1.Job
	for _, job := range m.jobs {
		switch script := jobScript(job); {
		case strings.Contains(script, "cctl bench run"):
			bench = append(bench, job)
		case strings.Contains(script, "cctl bench merge"):
			merge = append(merge, job)
		default:
			p.add("Job "+job.Name, "runs neither `cctl bench run` nor `cctl bench merge`")
		}
	}
	if len(bench) != 1 {
		p.add("manifest", "want exactly one Job running `cctl bench run`, found %d", len(bench))
	}
	if len(merge) != 1 {
		p.add("manifest", "want exactly one Job running `cctl bench merge`, found %d", len(merge))
	}
	for _, job := range bench {
		checkBench(job, pvcs, p)
	}
	for _, job := range merge {
		checkMerge(job, pvcs, p)
	}
	if len(bench) == 1 && len(merge) == 1 {
		b, mg := env(bench[0], "RUN_NAME"), env(merge[0], "RUN_NAME")
		if b != mg {
			p.add("Job "+merge[0].Name, "RUN_NAME %q differs from the shard Job's %q", mg, b)
		}
	}
}

func checkBench(job *batchv1.Job, pvcs map[string]*corev1.PersistentVolumeClaim, p *problems) {
	obj := "Job " + job.Name
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		p.add(obj, "completionMode is not Indexed (JOB_COMPLETION_INDEX would be unset)")
	}
	completions := int32(0)
	if s.Completions == nil || *s.Completions < 1 {
		p.add(obj, "completions must be set to the shard count")
	} else {
		completions = *s.Completions
	}
	if s.Parallelism == nil || *s.Parallelism < 1 {
		p.add(obj, "parallelism must be set")
	} else if completions > 0 && *s.Parallelism > completions {
		p.add(obj, "parallelism %d > completions %d", *s.Parallelism, completions)
	}
	if s.BackoffLimitPerIndex == nil && s.BackoffLimit == nil {
		p.add(obj, "neither backoffLimitPerIndex nor backoffLimit is set")
	}
	checkPodCommon(obj, &s.Template.Spec, pvcs, p)

	script := jobScript(job)
	if !strings.Contains(script, "JOB_COMPLETION_INDEX+1") && !shardRe.MatchString(script) {
		p.add(obj, "the command does not use JOB_COMPLETION_INDEX+1 (shards are 1-based)")
	}
	if mm := shardRe.FindStringSubmatch(script); mm == nil {
		p.add(obj, "the command has no `--shard $((JOB_COMPLETION_INDEX+1))/N`")
	} else if n, _ := strconv.Atoi(mm[1]); completions > 0 && int32(n) != completions {
		p.add(obj, "--shard K/%d but completions is %d: some shards would never run or clash", n, completions)
	}
	if !resumeRe.MatchString(script) {
		p.add(obj, "the command has no `--resume /results/.../shard-$((JOB_COMPLETION_INDEX+1))`")
	}
	if !regexp.MustCompile(`--vm[ =]never`).MatchString(script) {
		p.add(obj, "the command lacks `--vm never` (the image has no VM)")
	}

	ps := &s.Template.Spec
	if !hasHostnameAntiAffinity(ps, s.Template.Labels) {
		p.add(obj, "no required podAntiAffinity on kubernetes.io/hostname matching the Job's own pods (pods on one node share its kernel's congestion-control names)")
	}
	for _, c := range ps.Containers {
		cobj := obj + " container " + c.Name
		sc := c.SecurityContext
		privileged := sc != nil && sc.Privileged != nil && *sc.Privileged
		if !privileged {
			var have []corev1.Capability
			if sc != nil && sc.Capabilities != nil {
				have = sc.Capabilities.Add
			}
			for _, want := range requiredCaps {
				if !slices.Contains(have, want) && !slices.Contains(have, "CAP_"+want) {
					p.add(cobj, "securityContext.capabilities.add lacks %s", want)
				}
			}
		}
		checkMount(cobj, ps, c, "/sys/fs/bpf", "/sys/fs/bpf", false, p)
		checkMount(cobj, ps, c, "/sys/kernel/btf", "/sys/kernel/btf", true, p)
	}
}

func checkMerge(job *batchv1.Job, pvcs map[string]*corev1.PersistentVolumeClaim, p *problems) {
	obj := "Job " + job.Name
	checkPodCommon(obj, &job.Spec.Template.Spec, pvcs, p)
	if script := jobScript(job); !mergeRe.MatchString(script) {
		p.add(obj, "the command is not `cctl bench merge /results/<run>/shard-* --out /results/<run>/...`")
	}
}

// checkPodCommon: restartPolicy Never, one container, the results PVC at /results.
func checkPodCommon(obj string, ps *corev1.PodSpec, pvcs map[string]*corev1.PersistentVolumeClaim, p *problems) {
	if ps.RestartPolicy != corev1.RestartPolicyNever {
		p.add(obj, "restartPolicy is %q, want Never", ps.RestartPolicy)
	}
	if len(ps.Containers) != 1 {
		p.add(obj, "want one container, found %d", len(ps.Containers))
		return
	}
	c := ps.Containers[0]
	if c.Image == "" {
		p.add(obj, "container %s has no image", c.Name)
	}
	found := false
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != "/results" {
			continue
		}
		v := volume(ps, vm.Name)
		switch {
		case v == nil:
			p.add(obj, "volumeMount %s names no volume", vm.Name)
		case v.PersistentVolumeClaim == nil:
			p.add(obj, "/results is not a PersistentVolumeClaim")
		case pvcs[v.PersistentVolumeClaim.ClaimName] == nil:
			p.add(obj, "/results claims %q, which this file does not declare", v.PersistentVolumeClaim.ClaimName)
		case vm.ReadOnly:
			p.add(obj, "/results is mounted read-only")
		default:
			found = true
		}
	}
	if !found {
		p.add(obj, "no writable /results from the declared PersistentVolumeClaim")
	}
}

func checkMount(obj string, ps *corev1.PodSpec, c corev1.Container, hostPath, mountPath string, readOnly bool, p *problems) {
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != mountPath {
			continue
		}
		v := volume(ps, vm.Name)
		if v == nil || v.HostPath == nil || v.HostPath.Path != hostPath {
			p.add(obj, "%s is not the node's hostPath %s", mountPath, hostPath)
		} else if readOnly && !vm.ReadOnly {
			p.add(obj, "%s should be mounted readOnly", mountPath)
		}
		return
	}
	p.add(obj, "no volumeMount at %s (hostPath %s)", mountPath, hostPath)
}

func hasHostnameAntiAffinity(ps *corev1.PodSpec, podLabels map[string]string) bool {
	if ps.Affinity == nil || ps.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, term := range ps.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != "kubernetes.io/hostname" || term.LabelSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(podLabels)) {
			return true
		}
	}
	return false
}

func volume(ps *corev1.PodSpec, name string) *corev1.Volume {
	for i := range ps.Volumes {
		if ps.Volumes[i].Name == name {
			return &ps.Volumes[i]
		}
	}
	return nil
}

// jobScript is the first container's command and args, joined by spaces.
func jobScript(job *batchv1.Job) string {
	cs := job.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return ""
	}
	return strings.Join(append(slices.Clone(cs[0].Command), cs[0].Args...), " ")
}

func env(job *batchv1.Job, key string) string {
	for _, c := range job.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == key {
				return e.Value
			}
		}
	}
	return ""
}
