package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// left out of kube-scheduler's default profile: DynamicResources (DRA is not modelled here)
var disabledPlugins = sets.New(names.DynamicResources)

const informerSyncTimeout = 30 * time.Second

// oracle holds what every request shares: the in-tree plugin registry and the default profile.
type oracle struct {
	registry frameworkruntime.Registry
	profile  schedulerapi.KubeSchedulerProfile
}

func newOracle() (*oracle, error) {
	// kube-scheduler's default configuration, as scheduler.New makes it when none is given: the
	// v1 defaults (plugins, their args, feature gates) converted to the internal config
	var versioned configv1.KubeSchedulerConfiguration
	scheme.Scheme.Default(&versioned)
	var cfg schedulerapi.KubeSchedulerConfiguration
	if err := scheme.Scheme.Convert(&versioned, &cfg, nil); err != nil {
		return nil, err
	}
	if len(cfg.Profiles) != 1 {
		return nil, fmt.Errorf("expected one default profile, found %d", len(cfg.Profiles))
	}
	profile := cfg.Profiles[0]
	enabled := profile.Plugins.MultiPoint.Enabled[:0:0]
	for _, plugin := range profile.Plugins.MultiPoint.Enabled {
		if !disabledPlugins.Has(plugin.Name) {
			enabled = append(enabled, plugin)
		}
	}
	profile.Plugins.MultiPoint.Enabled = enabled
	args := profile.PluginConfig[:0:0]
	for _, pc := range profile.PluginConfig {
		if !disabledPlugins.Has(pc.Name) {
			args = append(args, pc)
		}
	}
	profile.PluginConfig = args
	return &oracle{registry: frameworkplugins.NewInTreeRegistry(), profile: profile}, nil
}

// answer handles one line; it never panics out (a plugin's panic becomes the answer's error).
func (o *oracle) answer(line []byte) (answer any) {
	id := requestID(line)
	defer func() {
		if recovered := recover(); recovered != nil {
			answer = errorAnswer{ID: id, Error: fmt.Sprintf("internal error: %v", recovered)}
		}
	}()
	req, err := parseRequest(line)
	if err != nil {
		return errorAnswer{ID: id, Error: err.Error()}
	}
	if req.Mode == "plugins" {
		result, err := o.plugins(req)
		if err != nil {
			return errorAnswer{ID: id, Error: err.Error()}
		}
		result.ID = id
		return result
	}
	if req.Mode == "replay" {
		result, err := o.replay(req)
		if err != nil {
			return errorAnswer{ID: id, Error: err.Error()}
		}
		result.ID = id
		return result
	}
	result, err := o.filter(req)
	if err != nil {
		return errorAnswer{ID: id, Error: err.Error()}
	}
	result.ID = id
	return result
}

func (o *oracle) plugins(req *request) (*pluginsAnswer, error) {
	c, err := o.newCluster(req)
	if err != nil {
		return nil, err
	}
	defer c.close()
	listed := c.fw.ListPlugins()
	names := func(set schedulerapi.PluginSet) []string {
		out := []string{}
		for _, plugin := range set.Enabled {
			out = append(out, plugin.Name)
		}
		return out
	}
	return &pluginsAnswer{
		KubernetesVersion: kubernetesVersion(),
		PreEnqueue:        names(listed.PreEnqueue),
		PreFilter:         names(listed.PreFilter),
		Filter:            names(listed.Filter),
	}, nil
}

// cluster is one request's world: a scheduler cache holding the nodes and bound pods, the
// snapshot the plugins read (updated from the cache as the scheduler does each cycle), and a
// framework of the default profile over an informer factory of a fake clientset holding the
// request's namespaces and storage objects (PVs, PVCs, StorageClasses, CSINodes).
type cluster struct {
	ctx      context.Context
	cancel   context.CancelFunc
	logger   klog.Logger
	cache    internalcache.Cache
	snapshot *internalcache.Snapshot
	fw       framework.Framework
	factory  informers.SharedInformerFactory
}

func (o *oracle) newCluster(req *request) (*cluster, error) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &cluster{ctx: ctx, cancel: cancel, logger: klog.FromContext(ctx)}
	ok := false
	defer func() {
		if !ok {
			c.close()
		}
	}()
	var objects []runtime.Object
	for _, ns := range req.Namespaces {
		objects = append(objects, ns)
	}
	for _, pv := range req.PVs {
		objects = append(objects, pv)
	}
	for _, pvc := range req.PVCs {
		objects = append(objects, pvc)
	}
	for _, class := range req.StorageClasses {
		objects = append(objects, class)
	}
	for _, csiNode := range req.CSINodes {
		objects = append(objects, csiNode)
	}
	client := fake.NewClientset(objects...)
	c.factory = informers.NewSharedInformerFactory(client, 0)

	// the scheduler's cache (no assumed pods expire: ttl 0), filled as its event handlers do:
	// every node, and every pod with spec.nodeName that is not finished (kube-scheduler's pod
	// informer leaves out Succeeded and Failed pods)
	c.cache = internalcache.New(ctx, 0, nil)
	for _, node := range req.Nodes {
		c.cache.AddNode(c.logger, node)
	}
	for _, pod := range req.Pods {
		if err := c.addPod(pod); err != nil {
			return nil, err
		}
	}
	c.snapshot = internalcache.NewEmptySnapshot()
	if err := c.cache.UpdateSnapshot(c.logger, c.snapshot); err != nil {
		return nil, err
	}

	profile := o.profile
	fw, err := frameworkruntime.NewFramework(ctx, o.registry, &profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(c.factory),
		frameworkruntime.WithSnapshotSharedLister(c.snapshot),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
	)
	if err != nil {
		return nil, fmt.Errorf("building the framework: %w", err)
	}
	c.fw = fw
	// the plugins asked for their listers while being built; now their informers run
	c.factory.Start(ctx.Done())
	if err := waitForInformers(c.factory); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// waitForInformers waits until every started informer has listed its objects. (The factory's
// WaitForCacheSync polls every 100 ms; this checks every millisecond.)
func waitForInformers(factory informers.SharedInformerFactory) error {
	closed := make(chan struct{})
	close(closed)
	deadline := time.Now().Add(informerSyncTimeout)
	for {
		synced := true
		for _, ok := range factory.WaitForCacheSync(closed) {
			synced = synced && ok
		}
		if synced {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("informers not synced after %v", informerSyncTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func (c *cluster) close() {
	if c.fw != nil {
		_ = c.fw.Close()
	}
	c.cancel()
	if c.factory != nil {
		c.factory.Shutdown()
	}
}

func (c *cluster) addPod(pod *v1.Pod) error {
	if pod.Spec.NodeName == "" || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return nil
	}
	if err := c.cache.AddPod(c.logger, pod); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// gated runs the PreEnqueue plugins (SchedulingGates): a rejection keeps the pod out of the
// scheduling queue.
func (c *cluster) gated(pod *v1.Pod) (string, string, bool) {
	for _, plugin := range c.fw.PreEnqueuePlugins() {
		if status := plugin.PreEnqueue(c.ctx, pod); !status.IsSuccess() {
			return plugin.Name(), status.Message(), true
		}
	}
	return "", "", false
}

// cycle is one scheduling cycle's PreFilter outcome for a pod.
type cycle struct {
	state  fwk.CycleState
	result *framework.PreFilterResult
	// rejected: PreFilter rejected the pod (every node gets status)
	rejected bool
	status   *fwk.Status
	// unschedulablePlugins: the plugins that rejected or narrowed the nodes
	unschedulablePlugins sets.Set[string]
}

// preFilter starts a scheduling cycle for pod as ScheduleOne does and runs the PreFilter plugins.
func (c *cluster) preFilter(pod *v1.Pod) (*cycle, error) {
	state := framework.NewCycleState()
	state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	result, status, plugins := c.fw.RunPreFilterPlugins(c.ctx, state, pod)
	cy := &cycle{state: state, result: result, status: status, unschedulablePlugins: plugins}
	if !status.IsSuccess() {
		if !status.IsRejected() {
			return nil, status.AsError()
		}
		cy.rejected = true
	}
	return cy, nil
}

// excludedStatus: the status findNodesThatFitPod gives the nodes a PreFilterResult leaves out.
func (cy *cycle) excludedStatus() *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(cy.unschedulablePlugins)))
}

func (o *oracle) filter(req *request) (*filterAnswer, error) {
	c, err := o.newCluster(req)
	if err != nil {
		return nil, err
	}
	defer c.close()
	pod := req.Pod
	answer := &filterAnswer{Feasible: []string{}, Reasons: map[string][]string{}, Plugins: map[string]string{}}
	_, answer.GatedMessage, answer.Gated = c.gated(pod)

	allNodes, err := c.snapshot.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	if len(allNodes) == 0 {
		answer.Message = scheduler.ErrNoNodesAvailable.Error()
		return answer, nil
	}
	// as the scheduler's findNodesThatFitPod, except that every node is filtered (it stops at
	// enough feasible nodes in large clusters) and there are no nominated pods or extenders
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	cy, err := c.preFilter(pod)
	if err != nil {
		answer.SchedulingError = err.Error()
		return answer, nil
	}
	diagnosis.UnschedulablePlugins = cy.unschedulablePlugins
	absentPlugin := ""
	if cy.rejected {
		diagnosis.NodeToStatus.SetAbsentNodesStatus(cy.status)
		diagnosis.PreFilterMsg = cy.status.Message()
		diagnosis.AddPluginStatus(cy.status)
		absentPlugin = cy.status.Plugin()
		if absentPlugin == "" {
			absentPlugin = strings.Join(sets.List(cy.unschedulablePlugins), ",")
		}
	} else {
		nodes := allNodes
		if !cy.result.AllNodes() {
			nodes = make([]fwk.NodeInfo, 0, len(cy.result.NodeNames))
			for name := range cy.result.NodeNames {
				if info, err := c.snapshot.Get(name); err == nil {
					nodes = append(nodes, info)
				}
			}
			diagnosis.NodeToStatus.SetAbsentNodesStatus(cy.excludedStatus())
			absentPlugin = strings.Join(sets.List(cy.unschedulablePlugins), ",")
		}
		for _, info := range nodes {
			status := c.fw.RunFilterPlugins(c.ctx, cy.state, pod, info)
			switch {
			case status.IsSuccess():
				answer.Feasible = append(answer.Feasible, info.Node().Name)
			case status.IsRejected():
				diagnosis.NodeToStatus.Set(info.Node().Name, status)
				diagnosis.AddPluginStatus(status)
			default:
				answer.SchedulingError = status.AsError().Error()
				return answer, nil
			}
		}
	}
	feasible := sets.New(answer.Feasible...)
	for _, info := range allNodes {
		name := info.Node().Name
		if feasible.Has(name) {
			continue
		}
		status := diagnosis.NodeToStatus.Get(name)
		answer.Reasons[name] = nonNil(status.Reasons())
		if plugin := status.Plugin(); plugin != "" {
			answer.Plugins[name] = plugin
		} else {
			answer.Plugins[name] = absentPlugin
		}
	}
	sort.Strings(answer.Feasible)
	if len(answer.Feasible) == 0 {
		fitError := &framework.FitError{Pod: pod, NumAllNodes: c.snapshot.NumNodes(), Diagnosis: diagnosis}
		answer.Message = fitError.Error()
	}
	return answer, nil
}

// replay checks each binding in order against the nodes, the bound pods and the bindings before
// it, then adds it to the cache (whether or not it was allowed: it was bound) and updates the
// snapshot incrementally, as the scheduler does between cycles.
func (o *oracle) replay(req *request) (*replayAnswer, error) {
	start := time.Now()
	c, err := o.newCluster(req)
	if err != nil {
		return nil, err
	}
	defer c.close()
	answer := &replayAnswer{Violations: []violation{}}
	for i, pod := range req.Bindings {
		nodeName := pod.Spec.NodeName
		found := violation{Index: i, Pod: pod.Namespace + "/" + pod.Name, Node: nodeName}
		// the pod as it was when the scheduler picked a node: not yet bound
		unbound := pod.DeepCopy()
		unbound.Spec.NodeName = ""
		if plugin, reasons := c.check(unbound, nodeName); reasons != nil {
			found.Plugin, found.Reasons = plugin, reasons
			answer.Violations = append(answer.Violations, found)
		}
		answer.Checked++
		if err := c.addPod(pod); err != nil {
			return nil, fmt.Errorf("binding %d: %w", i, err)
		}
		if err := c.cache.UpdateSnapshot(c.logger, c.snapshot); err != nil {
			return nil, err
		}
	}
	answer.Seconds = time.Since(start).Seconds()
	return answer, nil
}

// check: nil reasons when kube-scheduler's filters allow pod on nodeName, else the rejecting
// plugin and its reasons.
func (c *cluster) check(pod *v1.Pod, nodeName string) (string, []string) {
	if plugin, message, gated := c.gated(pod); gated {
		return plugin, []string{message}
	}
	info, err := c.snapshot.Get(nodeName)
	if err != nil {
		return "", []string{fmt.Sprintf("node %q is not in the request's nodes", nodeName)}
	}
	cy, err := c.preFilter(pod)
	if err != nil {
		// kube-scheduler gives up this cycle on an error: it would not have bound the pod
		return "", []string{"error: " + err.Error()}
	}
	if cy.rejected {
		plugin := cy.status.Plugin()
		if plugin == "" {
			plugin = strings.Join(sets.List(cy.unschedulablePlugins), ",")
		}
		return plugin, nonNil(cy.status.Reasons())
	}
	if !cy.result.AllNodes() && !cy.result.NodeNames.Has(nodeName) {
		return strings.Join(sets.List(cy.unschedulablePlugins), ","), cy.excludedStatus().Reasons()
	}
	status := c.fw.RunFilterPlugins(c.ctx, cy.state, pod, info)
	if status.IsSuccess() {
		return "", nil
	}
	if !status.IsRejected() {
		return status.Plugin(), []string{"error: " + status.AsError().Error()}
	}
	return status.Plugin(), nonNil(status.Reasons())
}

// nonNil: a rejection without reasons is still a rejection.
func nonNil(reasons []string) []string {
	if reasons == nil {
		return []string{}
	}
	return reasons
}
