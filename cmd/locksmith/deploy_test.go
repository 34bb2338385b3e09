package main

import (
	"strings"
	"testing"

	"github.com/locksmith-go/lock/internal/testing/redistest"
)

// TestDeploymentURLs: the CLI reaches every deployment that config opens,
// by URL: a lock that acquire takes there, inspect finds held.
func TestDeploymentURLs(t *testing.T) {
	redistest.ParallelUnlessFull(t)
	unix := redistest.StartUnix(t)
	master := redistest.Start(t, 1)[0]
	sentinels := redistest.StartSentinels(t, master, 3)
	cluster := redistest.StartCluster(t, 3)
	for _, c := range []struct{ name, url string }{
		{"unix", "single+unix://" + unix.Socket},
		{"unix over redigo", "single+unix://" + unix.Socket + "?driver=redigo"},
		{"sentinel", "single+sentinel://" + sentinels[0].Addr + "," + sentinels[1].Addr + "?master_name=" + redistest.MasterName},
		{"cluster", "single+cluster://" + strings.Join(cluster.Addrs(), ",")},
		{"redlock nodes", "redlock://?nodes=" + strings.Join([]string{
			"unix://" + unix.Socket, "redis%2Bsentinel://" + sentinels[2].Addr + "%3Fmaster_name%3D" + redistest.MasterName, "redis%2Bcluster://" + cluster.Addrs()[0]}, ",")},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := "LOCKSMITH_URL=" + c.url
			key := "deploy:" + strings.ReplaceAll(c.name, " ", "-")
			acquire(t, env, key, "--ttl", "1m")
			if r := locksmith(t, []string{env}, "inspect", key); r.code != 0 || !strings.Contains(r.stdout, "held") {
				t.Errorf("inspect: got %s\nwant exit 0, held", r)
			}
		})
	}
}
