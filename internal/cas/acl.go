package cas

import "strings"

// A user's ACL may allow a lock's key and the commands of the base rule
// but not the wait queue (its keys, or commands such as TIME and ZRANGE):
// the scripts that use the queue then fail, and their callers fall back to
// a call without it (see denied). A key that a script declares is checked
// when the script is called, and refused with NOPERM by every server. A
// command that the script calls is checked when it runs, and the servers
// word that refusal differently: "ERR The user executing the script can't
// run this command" (Redis 7.0), "ERR ACL failure in script: User … has
// no permissions to run the 'exists' command" (Redis 7.2 and later, Valkey
// 8). So the scripts call the queue's commands through aclLib's call,
// which asks the server whether the user may run the command, and raises
// NOPERM itself when it may not: no wording to recognise.

// aclLib is the Lua of call: redis.call, except that when the command fails
// and the user's ACL denies it (redis.acl_check_cmd, in Redis 7.0 and later
// and in Valkey), it raises NOPERM, naming the command and not its
// arguments (they may hold a token). A server without acl_check_cmd
// (before Redis 7.0; the embedded server) raises its own error.
const aclLib = `local function call(...)
	local r = redis.pcall(...)
	if type(r) == 'table' and r.err then
		if redis.acl_check_cmd and not redis.acl_check_cmd(...) then
			r = redis.error_reply('NOPERM this user has no permissions to run the ' .. string.lower((...)) .. ' command in a script')
		end
		error(r)
	end
	return r
end
`

// Refused reports whether err is a server's refusal of a command that it
// lacks (an unknown command, or option) or that the user's ACL denies
// (NOPERM): an answer, which says nothing about the lock.
func Refused(err error) bool { return lacks(err) || denied(err) }

// denied reports whether err is the server's refusal, by ACL, of a script's
// key or of a command it calls through aclLib's call: NOPERM; or, from a
// server without redis.acl_check_cmd (before Redis 7.0), its own wording,
// "The user executing the script can't run this command". A refusal of
// the script itself (NOPERM for EVALSHA: see refusal) is not: it is the
// caller's, whose Server then runs without scripts (see Detecting), rather
// than a script that uses less.
func denied(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return (strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "The user executing the script can't")) && refusal(err) == ""
}
