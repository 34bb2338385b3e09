package single

// Support returns what the script-free operations of s found the server to
// have (cas.Server.Support), or nil for a Strategy that runs scripts.
func Support(s *Strategy) map[string]bool {
	return s.srv.Support()
}

// Strategy is the strategy New builds, and NewStrategy builds it, for the
// tests that call its methods.
type Strategy = single

var NewStrategy = newStrategy
