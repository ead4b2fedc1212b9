// scheduler-oracle answers, for a pod and a cluster, which nodes kube-scheduler's own Filter
// plugins would allow, by running the real plugins of the pinned k8s.io/kubernetes module
// (its default profile, default plugin args, default feature gates) over a snapshot built from
// the request. voltpack binds pods itself; its tests ask this oracle whether each binding is one
// kube-scheduler would have allowed.
//
// Protocol: one JSON object a line on stdin, one answer a line on stdout (see protocol.go and
// tests/scheduler_oracle.py). A line that cannot be parsed gets an answer with "error"; the
// program goes on to the next line and ends at the end of its input.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

func main() {
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	verbosity := flag.Int("v", 0, "klog verbosity of the scheduler code (logs go to stderr)")
	version := flag.Bool("version", false, "print the Kubernetes version the plugins are from and exit")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile (runtime/pprof) to this file until stdin ends")
	flag.Parse()
	_ = klogFlags.Set("v", fmt.Sprint(*verbosity))
	if *version {
		fmt.Println(kubernetesVersion())
		return
	}
	// the framework records its extension points' latencies in these (as kube-scheduler does)
	metrics.Register()
	if *cpuProfile != "" {
		file, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(file)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scheduler-oracle:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	oracle, err := newOracle()
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler-oracle:", err)
		os.Exit(1)
	}
	if err := serve(oracle, os.Stdin, os.Stdout); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "scheduler-oracle:", err)
		os.Exit(1)
	}
}

// serve answers each line of in on out, in order, until in ends.
func serve(oracle *oracle, in io.Reader, out io.Writer) error {
	reader := bufio.NewReaderSize(in, 1<<20)
	writer := bufio.NewWriterSize(out, 1<<16)
	for {
		line, err := reader.ReadBytes('\n')
		// every line gets one answer, a blank one too (an error); a last line without its
		// newline only when it holds something
		if err == nil || len(bytes.TrimSpace(line)) > 0 {
			answer := oracle.answer(line)
			encoded, encodeErr := json.Marshal(answer)
			if encodeErr != nil {
				encoded, _ = json.Marshal(map[string]any{"error": "encoding the answer: " + encodeErr.Error()})
			}
			if _, werr := writer.Write(append(encoded, '\n')); werr != nil {
				return werr
			}
			if ferr := writer.Flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
