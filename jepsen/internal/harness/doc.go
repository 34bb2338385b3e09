// Package harness tests locksmith's locks the way Jepsen tests databases:
// clients hold locks while faults hit the network, the servers and the
// clients themselves, and a checker reads the history of the run for two
// holders of a key at once.
//
// It is internal to the jepsen module, a module of its own so that the
// repository's test command does not run it. So far it holds the checks, which need no fault to be tested, and
// a test of them on a real run with paused holders:
//
//   - [Check] sweeps a history's holds for overlaps per key, raw (from an
//     acquire's return to its release) and within validity (ended at the
//     hold's validity or its loss), and for fencing tokens issued twice or
//     out of real-time order;
//   - a [FencedRegister] refuses a token lower than the last it accepted,
//     and counts the stale writes it refused and the collisions, the same
//     token from two holders;
//   - a [Counter], read, then written back one more, by holders that
//     sleep between the two, counts the updates that the lock alone let
//     be lost.
//
// A [Net] is a run's network: a namespace for each node on a bridge, with a
// node's link cut and healed as the first fault. The other faults, and
// clients in processes of their own, come next; README.md, beside this
// package, says what the harness will be.
package harness
