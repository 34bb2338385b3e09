package config

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The deployments a Config names: its servers, as the Endpoints that
// drivers open.

// The topologies of a deployment.
const (
	standalone = "standalone" // a server: over TCP, or a Unix socket
	sentinel   = "sentinel"   // a master that Redis Sentinels monitor, and replace on failover
	cluster    = "cluster"    // a Redis Cluster, known by seed nodes
)

var topologies = []string{standalone, sentinel, cluster}

// deployment returns the topology of the Config's addresses: standalone
// when it names none.
func (c Config) deployment() string { return cmp.Or(c.Topology, standalone) }

func checkTopology(s string) error {
	if s != "" && !slices.Contains(topologies, s) {
		return fmt.Errorf("want one of %s, got %q", strings.Join(topologies, ", "), s)
	}
	return nil
}

// nodeForms is what a node's URL may be.
const nodeForms = "want redis://host:port, rediss://host:port, unix:///path, redis+sentinel://host:port?master_name=name or redis+cluster://host:port, each as go-redis reads it"

// nodeOptions are the query options of a node's URL that locksmith takes.
// go-redis's parsers know more, which the Config's settings (dial_timeout,
// pool_size, ...) set for every node, or which the lock's own retry policy
// and clean-up own (max_retries, ...).
var nodeOptions = []string{"db", "skip_verify", "master_name", "addr", "username", "password"}

// parseNodes reads redlock's nodes, each a URL that go-redis's parsers
// read: redis.ParseURL for a server (redis://, rediss://, unix://),
// redis.ParseFailoverURL for a master that Sentinels monitor
// (redis+sentinel://, rediss+sentinel://) and redis.ParseClusterURL for a
// Redis Cluster (redis+cluster://, rediss+cluster://). The Endpoints it
// returns name TLS by a non-nil TLS, whose files Open reads. Errors never
// quote a URL: it may hold a password.
func parseNodes(nodes []string) ([]Endpoint, error) {
	eps := make([]Endpoint, len(nodes))
	for i, raw := range nodes {
		e, err := parseNode(raw)
		if err != nil {
			return nil, fmt.Errorf("node %d of %d: %w", i+1, len(nodes), err)
		}
		if j := slices.IndexFunc(eps[:i], func(o Endpoint) bool { return o.name() == e.name() }); j >= 0 {
			return nil, fmt.Errorf("node %d of %d: names the server of node %d again: each node must be listed once", i+1, len(nodes), j+1)
		}
		eps[i] = e
	}
	return eps, nil
}

func parseNode(raw string) (Endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" || u.Opaque != "" || validText(raw) != nil {
		return Endpoint{}, errors.New("is not a URL: " + nodeForms)
	}
	for name := range u.Query() {
		if !slices.Contains(nodeOptions, name) {
			return Endpoint{}, fmt.Errorf("has the option %q, which locksmith does not take per node (it takes %s): set timeouts and pool_size for every node in the Config", name, strings.Join(nodeOptions, ", "))
		}
	}
	scheme, topology, _ := strings.Cut(u.Scheme, "+")
	switch {
	case scheme != "redis" && scheme != "rediss" && (scheme != "unix" || topology != ""):
		return Endpoint{}, errors.New("has an unknown scheme: " + nodeForms)
	case u.Fragment != "":
		return Endpoint{}, errors.New("must not have a fragment (#...)")
	case scheme == "unix" && u.Host != "":
		return Endpoint{}, errors.New("names a host: want unix:///path/of/redis.sock")
	case scheme != "unix" && u.Host == "":
		return Endpoint{}, errors.New("names no host: want redis://host:port")
	}
	goURL := *u
	goURL.Scheme = scheme
	var e Endpoint
	var tlsConfig *tls.Config
	switch topology {
	case "":
		o, err := redis.ParseURL(goURL.String())
		if err != nil {
			return Endpoint{}, goRedisError(err)
		}
		e = Endpoint{Topology: standalone, Network: o.Network, Addrs: []string{o.Addr}, DB: o.DB, Username: o.Username, Password: o.Password}
		tlsConfig = o.TLSConfig
	case sentinel:
		o, err := redis.ParseFailoverURL(goURL.String())
		if err != nil {
			return Endpoint{}, goRedisError(err)
		}
		if o.MasterName == "" {
			return Endpoint{}, errors.New("names no master: add master_name=<the name the Sentinels monitor it by>")
		}
		e = Endpoint{Topology: sentinel, Addrs: o.SentinelAddrs, MasterName: o.MasterName, DB: o.DB,
			Username: o.Username, Password: o.Password, SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword}
		tlsConfig = o.TLSConfig
	case cluster:
		o, err := redis.ParseClusterURL(goURL.String())
		if err != nil {
			return Endpoint{}, goRedisError(err)
		}
		e = Endpoint{Topology: cluster, Addrs: o.Addrs, Username: o.Username, Password: o.Password}
		tlsConfig = o.TLSConfig
	default:
		return Endpoint{}, errors.New("has an unknown topology after '+': " + nodeForms)
	}
	if tlsConfig != nil {
		e.TLS = &tls.Config{InsecureSkipVerify: tlsConfig.InsecureSkipVerify}
	}
	e.Network = cmp.Or(e.Network, "tcp")
	for _, a := range e.Addrs {
		if _, err := parseAddr(a); err != nil && e.Network == "tcp" {
			return Endpoint{}, err
		}
	}
	for _, s := range []struct {
		name, value string
		check       func(string) error
	}{
		{"the password", e.Password, checkPassword}, {"the sentinel password", e.SentinelPassword, checkPassword},
		{"the user", e.Username, validText}, {"the sentinel user", e.SentinelUsername, validText}, {"master_name", e.MasterName, validText},
	} {
		if err := s.check(s.value); err != nil {
			return Endpoint{}, fmt.Errorf("%s %w", s.name, err)
		}
	}
	return e, nil
}

// goRedisError is the error of a go-redis parser, which names what is
// wrong without the user information.
func goRedisError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New("is not a URL: " + nodeForms)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "redis: "))
}

// redactNodes returns the nodes setting with every password as xxxxx.
func redactNodes(s string) string {
	nodes := strings.Split(s, ",")
	for i, raw := range nodes {
		u, err := url.Parse(raw)
		if err != nil {
			nodes[i] = redacted
			continue
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", redacted)
			u.RawQuery = q.Encode()
		}
		nodes[i] = u.String()
	}
	return strings.Join(nodes, ",")
}

// endpoints returns the servers of a valid Config, each as a driver opens
// it: redlock's nodes, or the one server of the other strategies. A
// non-nil TLS says that it uses TLS; Open fills it in.
func (c Config) endpoints() []Endpoint {
	if len(c.Nodes) > 0 {
		eps, _ := parseNodes(c.Nodes)
		return eps
	}
	e := Endpoint{Topology: standalone, Network: "tcp", DB: c.DB, Username: c.Username, Password: c.Password}
	if c.TLS.Enabled {
		e.TLS = &tls.Config{}
	}
	if c.deployment() != standalone {
		e.Topology, e.Addrs, e.MasterName = c.Topology, c.Addrs, c.MasterName
		e.SentinelUsername, e.SentinelPassword = c.SentinelUsername, c.SentinelPassword
		return []Endpoint{e}
	}
	addrs, _ := parseAddrs(c.Addrs)
	eps := make([]Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = e
		eps[i].Addrs = []string{a}
		if isSocket(a) {
			eps[i].Network = "unix"
		}
	}
	return eps
}

// name names the Endpoint in errors and in Conns' order, without its
// credentials.
func (e Endpoint) name() string {
	switch e.Topology {
	case sentinel:
		return fmt.Sprintf("master %s of the sentinels %s", e.MasterName, strings.Join(e.Addrs, ","))
	case cluster:
		return "the cluster of " + strings.Join(e.Addrs, ",")
	}
	return strings.Join(e.Addrs, ",")
}

// withTLS returns e with its TLS configuration, from the Config's TLS
// settings, when it uses TLS.
func (e Endpoint) withTLS(t TLS) (Endpoint, error) {
	if e.TLS == nil {
		return e, nil
	}
	t.Enabled = true
	t.InsecureSkipVerify = t.InsecureSkipVerify || e.TLS.InsecureSkipVerify
	cfg, err := t.clientConfig()
	if err != nil {
		return e, err
	}
	e.TLS = forServer(cfg, e.Addrs[0]) // the first server's name for all, as go-redis names those of a Sentinel or Cluster deployment
	return e, nil
}
