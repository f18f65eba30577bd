package serve

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the service's Prometheus metrics (GET /metrics), in a registry of its own.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec   // by route and status
	latency   *prometheus.HistogramVec // by route
	tokensIn  prometheus.Counter
	cachedIn  prometheus.Counter
	tokensOut *prometheus.CounterVec // by kind: generated (completions), verified (sessions)
	waits     prometheus.Histogram
	stepTime  prometheus.Histogram
	stepRows  prometheus.Histogram
	stepJobs  prometheus.Histogram
	drafted   prometheus.Counter
	accepted  *prometheus.CounterVec // by depth
	evictions prometheus.Counter
}

func newMetrics(sv *Service) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verity_http_requests_total",
		Help: "HTTP requests answered, by route and status."}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "verity_http_request_seconds",
		Help: "Time from a request's arrival to the end of its reply, by route.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)}, []string{"route"})
	m.tokensIn = prometheus.NewCounter(prometheus.CounterOpts{Name: "verity_prompt_tokens_total", Help: "Prompt tokens of the sessions opened (completions' choices included)."})
	m.cachedIn = prometheus.NewCounter(prometheus.CounterOpts{Name: "verity_prompt_tokens_cached_total", Help: "Prompt positions taken from the prefix cache instead of computed."})
	m.tokensOut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verity_output_tokens_total",
		Help: "Tokens emitted by verify rounds: kind=completion for completions' plain decoding, kind=session for the verify API."}, []string{"kind"})
	m.waits = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "verity_queue_wait_seconds",
		Help: "Time admitted requests waited in the admission queue for cache space.", Buckets: prometheus.ExponentialBuckets(0.001, 3, 12)})
	m.stepTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "verity_step_seconds",
		Help: "Time of one verify step (all the rounds batched into it).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	m.stepRows = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "verity_step_rows",
		Help: "Rows (tree nodes of every round) in one verify step.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)})
	m.stepJobs = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "verity_step_rounds",
		Help: "Verify rounds (sessions) batched into one step.", Buckets: prometheus.ExponentialBuckets(1, 2, 8)})
	m.drafted = prometheus.NewCounter(prometheus.CounterOpts{Name: "verity_draft_nodes_total", Help: "Draft nodes verified."})
	m.accepted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verity_draft_accepted_total",
		Help: "Rounds that accepted a draft token at each depth (0: the first after the next token); over drafted rounds, the acceptance rate by depth."}, []string{"depth"})
	m.evictions = prometheus.NewCounter(prometheus.CounterOpts{Name: "verity_sessions_evicted_total", Help: "Idle verify sessions closed to free cache space."})
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.tokensIn, m.cachedIn, m.tokensOut, m.waits,
		m.stepTime, m.stepRows, m.stepJobs, m.drafted, m.accepted, m.evictions} {
		f(c)
	}
	gauge := func(name, help string, v func() float64) {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, v))
	}
	counter := func(name, help string, v func() float64) {
		f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, v))
	}
	gauge("verity_queue_depth", "Requests waiting for cache space.", func() float64 { return float64(sv.admit.stats().Queued) })
	gauge("verity_sessions_open", "Sessions open (verify-API sessions and completions' choices).", func() float64 {
		sv.mu.Lock()
		defer sv.mu.Unlock()
		return float64(len(sv.sessions))
	})
	gauge("verity_cache_slots", "K/V cache slots sessions may reserve (the cache less the step pool).", func() float64 { return float64(sv.admit.stats().Slots) })
	gauge("verity_cache_slots_reserved", "K/V cache slots reserved by open sessions.", func() float64 { return float64(sv.admit.stats().SlotsUsed) })
	gauge("verity_cache_slots_free", "K/V cache slots no session or cached prefix holds.", func() float64 { return float64(sv.e.FreeSlots()) })
	if _, states := sv.e.Capacity(); states > 0 {
		gauge("verity_state_slots", "Recurrent-state slots sessions may reserve.", func() float64 { return float64(sv.admit.stats().States) })
		gauge("verity_state_slots_reserved", "Recurrent-state slots reserved by open sessions.", func() float64 { return float64(sv.admit.stats().StatesUsed) })
		gauge("verity_state_slots_free", "Recurrent-state slots no session or cached prefix holds.", func() float64 { return float64(sv.e.FreeStates()) })
	}
	counter("verity_prefix_cache_hits_total", "Prompts that began with a cached prefix.", func() float64 { return float64(sv.e.PrefixStats().Hits) })
	counter("verity_prefix_cache_misses_total", "Prompts that did not.", func() float64 { return float64(sv.e.PrefixStats().Misses) })
	counter("verity_prefix_cache_evictions_total", "Cached prefixes dropped to free slots.", func() float64 { return float64(sv.e.PrefixStats().Evicted) })
	gauge("verity_prefix_cache_entries", "Cached prefixes.", func() float64 { return float64(sv.e.PrefixStats().Entries) })
	gauge("verity_ready", "1 while the service takes new work, 0 while it drains.", func() float64 {
		if sv.Draining() {
			return 0
		}
		return 1
	})
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) request(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

func (m *metrics) opened(prompt, cached int) {
	m.tokensIn.Add(float64(prompt))
	m.cachedIn.Add(float64(cached))
}

func (m *metrics) queueWait(d time.Duration) { m.waits.Observe(d.Seconds()) }

func (m *metrics) step(d time.Duration, rows, rounds int) {
	m.stepTime.Observe(d.Seconds())
	m.stepRows.Observe(float64(rows))
	m.stepJobs.Observe(float64(rounds))
}

// round counts a verify round: drafted nodes, the accepted depths and the tokens emitted
// (the accepted ones and the next).
func (m *metrics) round(drafted, accepted int, completion bool) {
	m.drafted.Add(float64(drafted))
	for d := range accepted {
		m.accepted.WithLabelValues(strconv.Itoa(d)).Inc()
	}
	kind := "session"
	if completion {
		kind = "completion"
	}
	m.tokensOut.WithLabelValues(kind).Add(float64(accepted + 1))
}

func (m *metrics) evicted() { m.evictions.Inc() }
