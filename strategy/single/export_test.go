package single

// Support returns what the script-free operations of s found the server to
// have (cas.Plain.Support), or nil for a Strategy that runs scripts.
func Support(s *Strategy) map[string]bool {
	if s.srv.Plain == nil {
		return nil
	}
	return s.srv.Plain.Support()
}

// Strategy is the strategy New builds, and NewStrategy builds it, for the
// tests that call its methods.
type Strategy = single

var NewStrategy = newStrategy
