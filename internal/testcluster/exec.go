package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// killPythonScript SIGKILLs every python3 process of a container, naming each.
const killPythonScript = `for p in /proc/[0-9]*; do if tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^python3 '; then kill -9 ${p#/proc/} && echo killed ${p#/proc/}; fi; done`

// KillPython SIGKILLs the python3 processes of a pod's container through the API server's
// exec (kubelet, containerd's streaming), as a crashing worker would die, and returns
// what the container printed ("killed <pid>" for each); no process found is an error.
func (c *Cluster) KillPython(ctx context.Context, namespace, pod, container string) (string, error) {
	out, err := c.Exec(ctx, namespace, pod, container, "/bin/bash", "-c", killPythonScript)
	if err != nil {
		return "", err
	}
	if !strings.Contains(out, "killed") {
		return "", fmt.Errorf("no python3 process in %s/%s: %q", pod, container, out)
	}
	return strings.TrimSpace(out), nil
}

// Exec runs a command in a pod's container through the API server's exec (kubelet,
// containerd's streaming) and returns what it printed on stdout.
func (c *Cluster) Exec(ctx context.Context, namespace, pod, container string, command ...string) (string, error) {
	req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(c.Config, "POST", req.URL())
	if err != nil {
		return "", fmt.Errorf("exec in %s: %w", pod, err)
	}
	var out, errOut bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		return "", fmt.Errorf("exec in %s: %w: %s", pod, err, errOut.String())
	}
	return out.String(), nil
}
