package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/kubecli"
)

// logs --kube reads worker 0's pod unless -i, --rank or --all-ranks say otherwise, as
// Arena reads its chief's; bad flags are refused with what to give instead.
func TestKubeLogOptions(t *testing.T) {
	at := time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		opts logsOptions
		want kubecli.LogOptions
		err  string
	}{
		"default: worker 0": {opts: logsOptions{rank: -1, tail: 20, follow: true},
			want: kubecli.LogOptions{Rank: -1, Tail: 20, Follow: true, Instance: "worker-0"}},
		"-i worker-1":  {opts: logsOptions{rank: -1, instance: "worker-1"}, want: kubecli.LogOptions{Rank: -1, Instance: "worker-1"}},
		"-i a pod":     {opts: logsOptions{rank: -1, instance: " mnist-a2-1-x2 "}, want: kubecli.LogOptions{Rank: -1, Instance: "mnist-a2-1-x2"}},
		"--all-ranks":  {opts: logsOptions{rank: -1, allRanks: true, attempt: 1}, want: kubecli.LogOptions{Rank: -1, Attempt: 1}},
		"--rank":       {opts: logsOptions{rank: 3}, want: kubecli.LogOptions{Rank: 3}},
		"--from":       {opts: logsOptions{rank: -1, from: "/mnt"}, want: kubecli.LogOptions{Rank: -1, From: "/mnt", Instance: "worker-0"}},
		"--since 10m":  {opts: logsOptions{rank: -1, since: "10m", timestamps: true}, want: kubecli.LogOptions{Rank: -1, Instance: "worker-0", Since: 10 * time.Minute, Timestamps: true}},
		"--since-time": {opts: logsOptions{rank: -1, sinceTime: "2026-11-22T13:00:00Z"}, want: kubecli.LogOptions{Rank: -1, Instance: "worker-0", SinceTime: at}},

		"--since abc":              {opts: logsOptions{rank: -1, since: "abc"}, err: "--since abc: not a duration: give a number and a unit, such as 30s, 10m or 2h"},
		"--since 10":               {opts: logsOptions{rank: -1, since: "10"}, err: "--since 10: not a duration"},
		"--since 0s":               {opts: logsOptions{rank: -1, since: "0s"}, err: "--since 0s: give a while more than 0, such as 30s, 10m or 2h"},
		"--since-time yesterday":   {opts: logsOptions{rank: -1, sinceTime: "yesterday"}, err: "--since-time yesterday: not an RFC 3339 time: give one such as 2026-11-22T13:00:00Z"},
		"--since and --since-time": {opts: logsOptions{rank: -1, since: "1h", sinceTime: "2026-11-22T13:00:00Z"}, err: "--since and --since-time: give one of them"},
		"-i and --rank":            {opts: logsOptions{rank: 1, instance: "worker-0"}, err: "-i and --rank: give one of them (--rank R reads the pod of the worker that runs rank R)"},
		"--all-ranks and -i":       {opts: logsOptions{rank: -1, instance: "worker-0", allRanks: true}, err: "--all-ranks and -i: give one of them"},
		"--all-ranks and --rank":   {opts: logsOptions{rank: 0, allRanks: true}, err: "--all-ranks and --rank: give one of them"},
		"blank -i":                 {opts: logsOptions{rank: -1, instance: " "}, err: "-i: give worker-I or a pod's name"},
		"--from and --timestamps":  {opts: logsOptions{rank: -1, from: "/mnt", timestamps: true}, err: "--from reads the rank logs, which have no timestamps"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := kubeLogOptions(tc.opts)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) || exitCode(err) != ExitUsage {
					t.Errorf("error %v (exit %d); want exit %d and one starting %q", err, exitCode(err), ExitUsage, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
