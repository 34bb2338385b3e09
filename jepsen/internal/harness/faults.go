package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// chain is the iptables chain, in each node's namespace, that holds the
// rules a Net adds, jumped to from INPUT and OUTPUT: HealAll flushes it,
// and no other rule.
const chain = "jepsen"

// FirewallSupported returns why this machine cannot firewall a Net (no
// iptables, or no iptables-restore), or nil. Block, Partition and Loss
// need it, as well as what a Net needs ([Supported]).
func FirewallSupported() error {
	for _, name := range []string{"iptables", "iptables-restore"} {
		if _, err := lookPath(name); err != nil {
			return fmt.Errorf("jepsen: no %s command, which the firewall faults need: %w", name, err)
		}
	}
	return nil
}

// lookPath returns the path of the command name: on PATH, or in /usr/sbin
// or /sbin, which a user's PATH may lack.
func lookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	for _, dir := range []string{"/usr/sbin/", "/sbin/"} {
		if p, err2 := exec.LookPath(dir + name); err2 == nil {
			return p, nil
		}
	}
	return "", err
}

// Block drops every packet from `from` to `to`, one way: to gets nothing
// that from sends it, from's sockets see no error, only silence, and what
// to sends still reaches from. Over a TCP connection made before, a
// client's requests reach a server whose replies do not reach it, or the
// reverse. The rule is in to's namespace; it lasts until [Net.HealAll].
func (n *Net) Block(from, to *Node) error {
	if err := n.check("Block", from, to); err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("jepsen: Block(%q, %q): a node to itself, want two nodes", from.Name, to.Name)
	}
	return to.addRules(fromRule(to, from))
}

// Partition blocks both ways between every two nodes in different groups,
// as [Net.Block] does each way; nodes within a group, and nodes in no
// group, are untouched. A node may be in one group at most. The rules go
// in node by node, so for a moment the partition is partial; they last
// until [Net.HealAll].
func (n *Net) Partition(groups ...[]*Node) error {
	group := map[*Node]int{}
	for g, nodes := range groups {
		if err := n.check("Partition", nodes...); err != nil {
			return err
		}
		for _, node := range nodes {
			if h, ok := group[node]; ok && h != g {
				return fmt.Errorf("jepsen: Partition: node %q in groups %d and %d, want each node in one group at most", node.Name, h, g)
			}
			group[node] = g
		}
	}
	for _, node := range n.members() {
		g, ok := group[node]
		if !ok {
			continue
		}
		var rules [][]string
		for _, other := range n.members() {
			if h, ok := group[other]; ok && h != g {
				rules = append(rules, fromRule(node, other)...)
			}
		}
		if err := node.addRules(rules); err != nil {
			return err
		}
	}
	return nil
}

// Loss drops each packet that node receives over the bridge, and each it
// sends, with probability p, from 0 to 1 (iptables's statistic match,
// mode random): a packet between two lossy nodes runs the chance twice.
// A TCP connection retransmits what was dropped, and its sockets see no
// error; a datagram dropped on its way out fails its send with EPERM.
// Rules add up: a second Loss drops what the first let pass. They last
// until [Net.HealAll]. Loss(0) adds no rule.
func (node *Node) Loss(p float64) error {
	if node == nil || node.net == nil {
		return errors.New("jepsen: Loss of a nil node")
	}
	if !(p >= 0 && p <= 1) { // NaN too
		return fmt.Errorf("jepsen: Loss(%v) of node %q: want a probability from 0 to 1", p, node.Name)
	}
	if p == 0 {
		return nil
	}
	prob := strconv.FormatFloat(p, 'f', -1, 64)
	link := inner(node)
	return node.addRules([][]string{
		{"-A", chain, "-i", link, "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "DROP"},
		{"-A", chain, "-o", link, "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "DROP"},
	})
}

// HealAll removes every rule that Block, Partition and Loss added, in every
// node, and brings every cut link up ([Node.Heal]). It goes on past an
// error, and returns them all.
func (n *Net) HealAll() error {
	var errs []error
	for _, node := range n.members() {
		rules, err := node.iptables("-S")
		if err == nil && hasChain(rules) {
			_, err = node.iptables("-F", chain)
		}
		errs = append(errs, err, node.Heal())
	}
	return errors.Join(errs...)
}

// members returns n's nodes, without its switch; none once n is closed.
func (n *Net) members() []*Node {
	if len(n.nodes) == 0 {
		return nil
	}
	return n.nodes[1:]
}

// check returns an error naming op if a node of nodes is nil or not of n.
func (n *Net) check(op string, nodes ...*Node) error {
	for _, node := range nodes {
		switch {
		case node == nil:
			return fmt.Errorf("jepsen: %s of a nil node", op)
		case node.net != n || !slices.Contains(n.members(), node):
			return fmt.Errorf("jepsen: %s: node %q is not of this Net", op, node.Name)
		}
	}
	return nil
}

// fromRule returns the rule, for node's chain, that drops what node
// receives over the bridge from other.
func fromRule(node, other *Node) [][]string {
	return [][]string{{"-A", chain, "-i", inner(node), "-s", other.IP, "-j", "DROP"}}
}

// inner is the name of node's end of its link, in its namespace, as NewNet
// names it: j<pid>n<i> for the namespace j<pid>-<i>.
func inner(node *Node) string {
	return node.net.prefix + "n" + strings.TrimPrefix(node.ns, node.net.prefix+"-")
}

// addRules adds rules to node's chain, in one iptables-restore, after
// making the chain and its jumps from INPUT and OUTPUT if they are not
// there.
func (node *Node) addRules(rules [][]string) error {
	if len(rules) == 0 {
		return nil
	}
	have, err := node.iptables("-S")
	if err != nil {
		return err
	}
	if !hasChain(have) {
		if _, err := node.iptables("-N", chain); err != nil {
			return err
		}
	}
	for _, builtin := range []string{"INPUT", "OUTPUT"} {
		if !slices.Contains(strings.Split(have, "\n"), "-A "+builtin+" -j "+chain) {
			if _, err := node.iptables("-I", builtin, "1", "-j", chain); err != nil {
				return err
			}
		}
	}
	var in strings.Builder
	in.WriteString("*filter\n")
	for _, r := range rules {
		in.WriteString(strings.Join(r, " ") + "\n")
	}
	in.WriteString("COMMIT\n")
	path, err := lookPath("iptables-restore")
	if err != nil {
		return fmt.Errorf("jepsen: %w", err)
	}
	cmd := exec.Command("ip", "netns", "exec", node.ns, path, "-w", "--noflush")
	cmd.Stdin = strings.NewReader(in.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("jepsen: iptables-restore in %s: %w: %s (rules %q)", node.Name, err, strings.TrimSpace(stderr.String()), in.String())
	}
	return nil
}

// hasChain reports whether the rules that iptables -S listed make chain.
func hasChain(rules string) bool {
	return slices.Contains(strings.Split(rules, "\n"), "-N "+chain)
}

// iptables runs iptables with args in node's namespace, waiting for the
// xtables lock, and returns its output.
func (node *Node) iptables(args ...string) (string, error) {
	path, err := lookPath("iptables")
	if err != nil {
		return "", fmt.Errorf("jepsen: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("ip", append([]string{"netns", "exec", node.ns, path, "-w"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("jepsen: iptables %s in %s: %w: %s", strings.Join(args, " "), node.Name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
