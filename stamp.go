package lock

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// A stamp is what a Locker writes in a lock's value between the token and
// the metadata (strategy.Request.Stamp), so that whoever inspects the lock,
// or waits for it, learns how long its holder has held it and, where the
// holder's hooks gave one (Hooks.Trace), the holder's trace context:
//
//	<token> RS <unix milliseconds> [/ <trace-id>-<span-id>] RS <metadata>
//
// RS is the ASCII record separator, 0x1e, which WithMetadata refuses at
// the start of metadata, so that a value reads one way only. The time is
// the holder's clock when the attempt that obtained the lock was sent; a
// reader subtracts it from its own, so what it reads is off by the skew
// between the two clocks (and at least a millisecond, so that a zero
// HeldFor means unknown). A value without a stamp, such
// as another library's, reads as metadata alone.
const stampMark = '\x1e'

// traceLen is the length of a trace context in a stamp: 32 hexadecimal
// digits of trace-id, "-" and 16 of span-id, as in a W3C traceparent.
const traceLen = 32 + 1 + 16

// stampLen is the most that writeStamp writes for trace: the marks, the
// milliseconds (at most 19 digits), and the trace with its slash.
func stampLen(trace string) int {
	n := 2 + 19
	if trace != "" {
		n += 1 + len(trace)
	}
	return n
}

// writeStamp writes to b the stamp of an attempt sent at t, by a holder
// whose trace context is trace (validTrace, or "").
func writeStamp(b *strings.Builder, t time.Time, trace string) {
	var ms [19]byte
	b.WriteByte(stampMark)
	b.Write(strconv.AppendInt(ms[:0], t.UnixMilli(), 10))
	if trace != "" {
		b.WriteByte('/')
		b.WriteString(trace)
	}
	b.WriteByte(stampMark)
}

// validTrace reports whether trace is a trace context that a stamp can
// carry: lower-case hexadecimal trace-id and span-id, joined by "-", both
// non-zero.
func validTrace(trace string) bool {
	if len(trace) != traceLen || trace[32] != '-' {
		return false
	}
	return isHex(trace[:32]) && isHex(trace[33:]) &&
		strings.Trim(trace[:32], "0") != "" && strings.Trim(trace[33:], "0") != ""
}

func isHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// readStamp splits metadata, as strategy.SplitValue returns it, into the
// holder's stamp and its own metadata. ok is false, and metadata is
// returned whole, when it does not start with a well-formed stamp.
func readStamp(metadata string) (sent time.Time, trace, rest string, ok bool) {
	if len(metadata) < 3 || metadata[0] != stampMark {
		return time.Time{}, "", metadata, false
	}
	end := strings.IndexByte(metadata[1:], stampMark) + 1
	if end <= 0 {
		return time.Time{}, "", metadata, false
	}
	ms, trace, _ := strings.Cut(metadata[1:end], "/")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 0 || ms[0] == '+' || trace != "" && !validTrace(trace) {
		return time.Time{}, "", metadata, false
	}
	return time.UnixMilli(n), trace, metadata[end+1:], true
}

// unstamp turns the metadata that st holds, as the strategy read it from
// the stored values, into the holders' own metadata, and fills in what
// their stamps say: HeldFor and Trace.
//
// It rewrites copies of st's Holders and Nodes, never the strategy's own:
// a strategy may still read them, as Redlock's Break's fan-out does after
// the call returned at its deadline.
func unstamp(st *State) {
	now := time.Now()
	unstampOne(now, &st.Metadata, &st.HeldFor, &st.Trace)
	st.Holders, st.Nodes = slices.Clone(st.Holders), slices.Clone(st.Nodes)
	for i := range st.Holders {
		h := &st.Holders[i]
		unstampOne(now, &h.Metadata, &h.HeldFor, &h.Trace)
	}
	for i := range st.Nodes {
		var held time.Duration
		var trace string
		unstampOne(now, &st.Nodes[i].Metadata, &held, &trace)
	}
}

// unstampOne reads the stamp at the start of *metadata, if there is one,
// into *held and *trace, and leaves the rest in *metadata.
func unstampOne(now time.Time, metadata *string, held *time.Duration, trace *string) {
	sent, tr, rest, ok := readStamp(*metadata)
	if !ok {
		return
	}
	*metadata, *held, *trace = rest, max(now.Sub(sent), time.Millisecond), tr
}
