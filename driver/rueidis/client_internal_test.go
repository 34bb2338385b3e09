package rueidis

import (
	"testing"

	"github.com/redis/rueidis"
)

// TestClientOption: NewClient and NewClusterClient set each option a lock
// call depends on, whatever o said, and leave the rest of o as it was.
func TestClientOption(t *testing.T) {
	given := rueidis.ClientOption{InitAddress: []string{"a:1"}, SelectDB: 3, DisableCache: true,
		DisableAutoPipelining: true, PipelineMultiplex: 2, ForceSingleClient: true}
	for _, c := range []struct {
		name   string
		single bool
	}{{"NewClient", true}, {"NewClusterClient", false}} {
		t.Run(c.name, func(t *testing.T) {
			o := clientOption(given, c.single)
			for _, f := range []struct {
				option    string
				got, want any
			}{
				{"DisableRetry", o.DisableRetry, true},
				{"AlwaysPipelining", o.AlwaysPipelining, true},
				{"DisableAutoPipelining", o.DisableAutoPipelining, false}, // rueidis clears AlwaysPipelining with it
				{"PipelineMultiplex", o.PipelineMultiplex, -1},
				{"ForceSingleClient", o.ForceSingleClient, c.single},
				{"InitAddress[0]", o.InitAddress[0], "a:1"},
				{"SelectDB", o.SelectDB, 3},
				{"DisableCache", o.DisableCache, true},
			} {
				if f.got != f.want {
					t.Errorf("%s = %v, want %v", f.option, f.got, f.want)
				}
			}
		})
	}
}
