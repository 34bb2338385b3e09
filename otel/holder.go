package lockotel

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"

	"github.com/locksmith-go/lock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// This file connects a waiter's trace to its holder's. An Obtain stores its
// lock.obtain span's context in the lock's value (lock.Hooks.Trace); a
// waiter that finds the lock held reads it back (lock.NotObtainedError)
// and links its own lock.obtain span to it; and the holder's lock.hold
// span, a child of that lock.obtain span, covers the hold. The link goes
// to the lock.obtain span, not to lock.hold, because a span's ID is made
// when it starts, and the hold starts after the value that names it is
// written; lock.hold is the one child of the span the link names.

// Attribute keys of the holder, on a waiter's span and its link.
const (
	attrHolderFingerprint = attribute.Key("locksmith.lock.holder.fingerprint")
	attrHolderMetadata    = attribute.Key("locksmith.lock.holder.metadata")
	attrHolderHeldFor     = attribute.Key("locksmith.lock.holder.held_for")
	attrHolderTTL         = attribute.Key("locksmith.lock.holder.ttl")
	attrWaiters           = attribute.Key("locksmith.lock.waiters")
	attrHeld              = attribute.Key("locksmith.lock.held")
)

// WithoutHolderTrace stops NewLocker from storing each lock.obtain span's
// trace context in the lock's value (49 bytes more in each value, and one
// allocation more in each Obtain with a sampled span), so that waiters'
// spans cannot link to their holders'. Waiters still record the holder's
// fingerprint, metadata and times.
func WithoutHolderTrace() Option {
	return optionFunc(func(c *config) { c.noHolderTrace = true })
}

// holderTrace is the lock.Hooks.Trace of NewLocker: the context of the
// Obtain's lock.obtain span, when it is sampled, so that a waiter's link
// names a span that is recorded.
func holderTrace(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	var b [32 + 1 + 16]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[:32], tid[:])
	b[32] = '-'
	hex.Encode(b[33:], sid[:])
	return string(b[:])
}

// parseTrace is the span context that a holder's trace (lock.State.Trace)
// names, and whether it names one.
func parseTrace(s string) (trace.SpanContext, bool) {
	if len(s) != 32+1+16 || s[32] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err1 := trace.TraceIDFromHex(s[:32])
	sid, err2 := trace.SpanIDFromHex(s[33:])
	if err1 != nil || err2 != nil {
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}), true
}

// holderAttrs are the attributes that name the holder of st, a lock found
// held: its fingerprint and, where known, its metadata and times and the
// waiters. Never its token, which no State has.
func holderAttrs(st lock.State) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 5)
	if st.Fingerprint != "" {
		attrs = append(attrs, attrHolderFingerprint.String(st.Fingerprint))
	}
	if st.Metadata != "" {
		attrs = append(attrs, attrHolderMetadata.String(st.Metadata))
	}
	if st.HeldFor > 0 {
		attrs = append(attrs, attrHolderHeldFor.Float64(st.HeldFor.Seconds()))
	}
	if st.TTL > 0 {
		attrs = append(attrs, attrHolderTTL.Float64(st.TTL.Seconds()))
	}
	return append(attrs, attrWaiters.Int(st.Waiters))
}

// contended records, on the lock.obtain span of st, an attempt that found
// the lock held (err): the lock.contended event, with the holder's
// attributes, and a link to the holder's lock.obtain span the first time
// this Obtain meets that holder.
func (st *obtainState) contended(span trace.Span, attempt int, err error) {
	var held *lock.NotObtainedError
	if !errors.As(err, &held) || !held.Holder.Held {
		span.AddEvent("lock.contended", trace.WithAttributes(attrAttempt.Int(attempt)))
		return
	}
	attrs := append(holderAttrs(held.Holder), attrAttempt.Int(attempt))
	span.AddEvent("lock.contended", trace.WithAttributes(attrs...))
	st.holder = attrs[:len(attrs)-1]
	if sc, ok := parseTrace(held.Holder.Trace); ok && held.Holder.Trace != st.linked {
		st.linked = held.Holder.Trace
		span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attrHolderFingerprint.String(held.Holder.Fingerprint)}})
	}
}

// holds are the lock.hold spans of the locks held: those whose Obtain's
// span recorded, by lock, in the obtainState of that Obtain (its hold and
// attemptStart). A map under a mutex, rather than a sync.Map, whose every
// store of a new key allocates.
type holds struct {
	mu sync.Mutex
	m  map[*lock.Lock]*obtainState
}

func (h *holds) store(lk *lock.Lock, st *obtainState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[*lock.Lock]*obtainState)
	}
	h.m[lk] = st
}

func (h *holds) load(lk *lock.Lock) *obtainState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[lk]
}

func (h *holds) loadAndDelete(lk *lock.Lock) *obtainState {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.m[lk]
	delete(h.m, lk)
	return st
}

// startHold starts the lock.hold span of lk, which the Obtain whose span
// st records returned, as a child of that span. It starts when the
// attempt that obtained the lock did (as the Lock counts its hold, and so
// the hold duration metric), so that it ends with the span as long as the
// metric's measurement.
func (t *telemetry) startHold(st *obtainState, e lock.Event, lk *lock.Lock) {
	_, st.hold = t.tracer.Start(st.Context, "lock.hold", trace.WithTimestamp(st.attemptStart), trace.WithAttributes(t.spanAttrs(e)...))
	t.holds.store(lk, st)
}

// refreshed records a refresh of lk, which ended with err, on its
// lock.hold span, if it has one.
func (t *telemetry) refreshed(lk *lock.Lock, err error) {
	st := t.holds.load(lk)
	if st == nil {
		return
	}
	attrs := []attribute.KeyValue{attrOutcome.String("refreshed")}
	if err != nil {
		attrs = []attribute.KeyValue{attrOutcome.String("error"), attrError.String(errorType(err))}
	}
	st.hold.AddEvent("lock.refresh", trace.WithAttributes(attrs...))
}

// endHold ends the lock.hold span of the lock that e reports ended: held
// for e.Held, which the hold duration metric records too, and released,
// or lost, with why.
func (t *telemetry) endHold(e lock.Event, end string) {
	st := t.holds.loadAndDelete(e.Lock)
	if st == nil {
		return
	}
	if e.Err == nil {
		st.hold.SetAttributes(attrEnd.String(end), attrHeld.Float64(e.Held.Seconds()))
	} else {
		st.hold.SetAttributes(attrEnd.String(end), attrHeld.Float64(e.Held.Seconds()), attrError.String(errorType(e.Err)))
		st.hold.SetStatus(codes.Error, "lost: "+errorType(e.Err))
	}
	st.hold.End(trace.WithTimestamp(st.attemptStart.Add(e.Held)))
}
