// Package harness tests locksmith's locks the way Jepsen tests databases:
// clients hold locks while faults hit the network, the servers and the
// clients themselves, and a checker reads the history of the run for two
// holders of a key at once.
//
// It is internal to the jepsen module, a module of its own so that the
// repository's test command does not run it. Its parts:
//
//   - a [Net] of network namespaces on a bridge, one per node, with its
//     faults: a node cut off ([Node.Cut]), one-way drops ([Net.Block]),
//     partitions of any shape ([Net.Partition]) and loss ([Node.Loss]);
//   - a [Server] in a node, which the harness reaches on a Unix socket
//     outside every fault, killed, restarted, paused; a [Delayer] in front
//     of it, for delay; a [Clock] that moves its wall clock; [Sentinels]
//     that fail it over;
//   - client processes ([RunClient]) that report their history, stamped
//     with [Now], to a [Control] socket, where the resources they write to
//     live: a [FencedRegister], a [Counter] and a [ValueRegister];
//   - the checks: [Check] for overlaps and fencing tokens, [Live] for
//     liveness, [Leaks] for keys left behind.
//
// TestJepsen runs every configuration under a seeded schedule of faults;
// README.md, beside this package, says how.
package harness
