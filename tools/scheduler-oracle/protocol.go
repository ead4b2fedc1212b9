package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	kjson "sigs.k8s.io/json"

	// the API server's defaulting of core/v1 and storage/v1 objects (registered in legacyscheme)
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
)

// request is one line of input. Objects are as the Kubernetes API serialises them.
type request struct {
	ID json.RawMessage `json:"id,omitempty"`
	// Mode is "filter" (the default), "replay" or "plugins".
	Mode           string                      `json:"mode,omitempty"`
	Nodes          []*v1.Node                  `json:"nodes,omitempty"`
	Pods           []*v1.Pod                   `json:"pods,omitempty"`
	Namespaces     []*v1.Namespace             `json:"namespaces,omitempty"`
	PVs            []*v1.PersistentVolume      `json:"pvs,omitempty"`
	PVCs           []*v1.PersistentVolumeClaim `json:"pvcs,omitempty"`
	StorageClasses []*storagev1.StorageClass   `json:"storageClasses,omitempty"`
	// CSINodes: the attach limits NodeVolumeLimits reads (as each node's kubelet reports them)
	CSINodes []*storagev1.CSINode `json:"csiNodes,omitempty"`
	Pod      *v1.Pod              `json:"pod,omitempty"`
	Bindings []*v1.Pod            `json:"bindings,omitempty"`
}

// filterAnswer is the answer to a "filter" request.
type filterAnswer struct {
	ID json.RawMessage `json:"id"`
	// Feasible: the nodes every Filter plugin allows, sorted.
	Feasible []string `json:"feasible"`
	// Reasons: for each infeasible node, the reasons its failing plugin gave (Status.Reasons()).
	Reasons map[string][]string `json:"reasons"`
	// Plugins: for each infeasible node, the plugin that rejected it (for a node a PreFilterResult
	// left out, the PreFilter plugins that narrowed the nodes, comma-separated).
	Plugins map[string]string `json:"plugins"`
	// Message: what kube-scheduler's FitError.Error() says when no node is feasible (without
	// the PostFilter/preemption part); "" when some node is.
	Message string `json:"message"`
	// Gated: a PreEnqueue plugin (SchedulingGates) keeps the pod out of the scheduling queue.
	Gated bool `json:"gated"`
	// GatedMessage: that plugin's message, e.g. "waiting for scheduling gates: [example.com/gate]".
	GatedMessage string `json:"gatedMessage,omitempty"`
	// SchedulingError: a plugin failed with an error (not a rejection); kube-scheduler would
	// retry the pod. Empty normally.
	SchedulingError string `json:"schedulingError,omitempty"`
}

// violation is one binding of a replay that kube-scheduler's filters would not have allowed.
type violation struct {
	Index   int      `json:"index"`
	Pod     string   `json:"pod"`
	Node    string   `json:"node"`
	Plugin  string   `json:"plugin"`
	Reasons []string `json:"reasons"`
}

// replayAnswer is the answer to a "replay" request.
type replayAnswer struct {
	ID         json.RawMessage `json:"id"`
	Checked    int             `json:"checked"`
	Violations []violation     `json:"violations"`
	// Seconds: how long the check took (building the snapshot included).
	Seconds float64 `json:"seconds"`
}

// pluginsAnswer is the answer to a "plugins" request: the framework's plugins at the extension
// points the oracle runs, in the order it runs them.
type pluginsAnswer struct {
	ID                json.RawMessage `json:"id"`
	KubernetesVersion string          `json:"kubernetesVersion"`
	PreEnqueue        []string        `json:"preEnqueue"`
	PreFilter         []string        `json:"preFilter"`
	Filter            []string        `json:"filter"`
}

type errorAnswer struct {
	ID    json.RawMessage `json:"id"`
	Error string          `json:"error"`
}

// parseRequest decodes a line as the API server's JSON decoder does (field names are
// case-sensitive) and defaults the objects as the API server stores them (e.g. a container's
// requests from its limits, a node's allocatable from its capacity, a StorageClass's
// volumeBindingMode Immediate).
func parseRequest(line []byte) (*request, error) {
	var req request
	// strict as `kubectl --validate=strict`: an unknown or repeated field (a typo in a test's
	// manifest would otherwise go unnoticed) makes the request fail
	strictErrs, err := kjson.UnmarshalStrict(line, &req, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	if len(strictErrs) > 0 {
		return nil, errors.Join(strictErrs...)
	}
	switch req.Mode {
	case "", "filter":
		req.Mode = "filter"
		if req.Pod == nil {
			return nil, fmt.Errorf(`a "filter" request needs "pod"`)
		}
		if len(req.Bindings) > 0 {
			return nil, fmt.Errorf(`"bindings" belong to a "replay" request`)
		}
	case "plugins":
	case "replay":
		if req.Pod != nil {
			return nil, fmt.Errorf(`a "replay" request checks "bindings", not "pod"`)
		}
		for i, binding := range req.Bindings {
			if binding == nil || binding.Spec.NodeName == "" {
				return nil, fmt.Errorf("binding %d has no spec.nodeName", i)
			}
		}
	default:
		return nil, fmt.Errorf("unknown mode %q (filter, replay or plugins)", req.Mode)
	}
	seen := map[string]bool{}
	for i, node := range req.Nodes {
		if node == nil || node.Name == "" {
			return nil, fmt.Errorf("node %d has no metadata.name", i)
		}
		if seen[node.Name] {
			return nil, fmt.Errorf("node %q is listed twice", node.Name)
		}
		seen[node.Name] = true
		defaultObject(node)
	}
	pods := append(append([]*v1.Pod{}, req.Pods...), req.Bindings...)
	if req.Pod != nil {
		pods = append(pods, req.Pod)
	}
	keys := map[string]bool{}
	for i, pod := range pods {
		if pod == nil || pod.Name == "" {
			return nil, fmt.Errorf("pod %d has no metadata.name", i)
		}
		if pod.Namespace == "" {
			pod.Namespace = v1.NamespaceDefault // the API server takes it from the request's path
		}
		key := pod.Namespace + "/" + pod.Name
		if keys[key] {
			return nil, fmt.Errorf("pod %s is listed twice", key)
		}
		keys[key] = true
		if pod.UID == "" {
			// the scheduler's cache keys pods by UID; the API server would have set one
			pod.UID = types.UID("scheduler-oracle/" + key)
		}
		defaultObject(pod)
	}
	for _, ns := range req.Namespaces {
		defaultObject(ns)
	}
	for _, pv := range req.PVs {
		defaultObject(pv)
	}
	for _, pvc := range req.PVCs {
		if pvc.Namespace == "" {
			pvc.Namespace = v1.NamespaceDefault
		}
		defaultObject(pvc)
	}
	for _, class := range req.StorageClasses {
		defaultObject(class)
	}
	for _, csiNode := range req.CSINodes {
		defaultObject(csiNode)
	}
	return &req, nil
}

func defaultObject(obj runtime.Object) {
	legacyscheme.Scheme.Default(obj)
}

// requestID is the "id" of a line that may not parse as a request.
func requestID(line []byte) json.RawMessage {
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &head) != nil || len(head.ID) == 0 {
		return json.RawMessage("null")
	}
	return head.ID
}

func kubernetesVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/kubernetes" {
			return dep.Version
		}
	}
	return "unknown"
}
