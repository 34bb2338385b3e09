package setnxgetset

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Format is how a fleet writes the expiry timestamp that a legacy lock
// stores as its value. Every client that locks the same keys must use the
// same Format: a reader that takes seconds for milliseconds would judge a
// live lock expired and steal it.
//
// A custom Format supports a fleet whose clients write something else, such
// as nanoseconds or "<uuid>:<ms>".
type Format interface {
	// Encode returns the value of a lock taken at now for ttl: its expiry
	// timestamp, as the fleet's clients write it. The timestamp must not
	// be earlier than now+ttl: the strategy reads it back with Decode
	// before writing it, and refuses the TTL if it is not.
	Encode(now time.Time, ttl time.Duration) string
	// Decode parses a stored value into the time the lock expires; ok is
	// false if s is not a timestamp of this format.
	Decode(s string) (expiry time.Time, ok bool)
}

var (
	// Seconds writes integer unix seconds, now + timeout + 1, with the
	// timeout rounded up to whole seconds: the pattern of the Redis SETNX
	// documentation. It matches clients that parse integer seconds, such as
	// lantins/resque-lock-timeout (which writes now + timeout).
	Seconds Format = unixFormat{unit: time.Second}

	// Milliseconds writes integer unix milliseconds, now + timeout + 1. It
	// matches abelaska/jedis-lock (2011), errorception/redis-lock and
	// ServiceStack.Redis RedisLock. It reads values below 1e11 (1973 in
	// milliseconds, but a present-day time in seconds) as not being
	// timestamps of this format, so that a peer misconfigured to write
	// seconds is never judged expired and robbed.
	Milliseconds Format = unixFormat{unit: time.Millisecond, min: 1e11}

	// FloatSeconds writes unix seconds with microseconds, now + timeout,
	// such as "1700000000.250000". It matches kenn/redis-mutex,
	// nateware/redis-objects up to 1.3, redis-py 2.x Lock, bbangert/retools
	// and phpnode/YiiRedis, whose readers parse a float (several of them
	// write now + timeout + 1; reading needs only the same unit).
	FloatSeconds Format = floatSeconds{}
)

// unixFormat writes integer counts of unit since the epoch, expiry + 1.
type unixFormat struct {
	unit time.Duration
	min  int64 // smaller counts are not timestamps of this format
}

func (f unixFormat) Encode(now time.Time, ttl time.Duration) string {
	timeout := (ttl + f.unit - 1) / f.unit // rounded up
	return strconv.FormatInt(now.UnixNano()/int64(f.unit)+int64(timeout)+1, 10)
}

func (f unixFormat) Decode(s string) (time.Time, bool) {
	t, ok := parse(s, f.unit)
	if !ok || t.UnixNano() < f.min*int64(f.unit) {
		return time.Time{}, false
	}
	return t, true
}

func (f unixFormat) String() string {
	if f.unit == time.Second {
		return "seconds"
	}
	return "milliseconds"
}

type floatSeconds struct{}

func (floatSeconds) Encode(now time.Time, ttl time.Duration) string {
	expiry := now.Add(ttl)
	us := expiry.UnixMicro()
	if time.UnixMicro(us).Before(expiry) {
		us++ // never earlier than now+ttl
	}
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

func (floatSeconds) Decode(s string) (time.Time, bool) { return parse(s, time.Second) }

func (floatSeconds) String() string { return "float-seconds" }

// maxUnixNano is the latest time parse accepts, latest, in 2116; later
// values are not timestamps (a millisecond value read as seconds lands
// there). The strategy refuses a TTL that would end after it.
const maxUnixNano = 1 << 62

var latest = time.Unix(0, maxUnixNano).UTC()

// parse reads a count of unit since the epoch, as integer or decimal text
// (exactly, to the nanosecond) or any other float text, with surrounding
// white space. It rejects negative and non-finite numbers, which no legacy
// client writes, and times past maxUnixNano.
func parse(s string, unit time.Duration) (time.Time, bool) {
	s = strings.TrimSpace(s)
	whole, frac, _ := strings.Cut(s, ".")
	if w, err := strconv.ParseUint(whole, 10, 63); err == nil && digits(frac) {
		if w > maxUnixNano/uint64(unit) {
			return time.Time{}, false
		}
		frac = (frac + "000000000")[:9] // nanoseconds of a unit
		f, _ := strconv.ParseUint(frac, 10, 64)
		return time.Unix(0, int64(w)*int64(unit)+int64(f*uint64(unit)/1e9)), true
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) || n*float64(unit) > maxUnixNano {
		return time.Time{}, false
	}
	return time.Unix(0, int64(n*float64(unit))), true
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
