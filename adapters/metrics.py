"""Prometheus metrics, base units, ``memoryos_`` prefix, never a user id in a label.

Built from an injected registry so tests (and several apps in one process) get their own.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from adapters.embedders.model_process import ModelProcessCollector

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # the model's own processes (MEMORYOS_MINILM_HOST=process): zeros when none runs
        r.register(ModelProcessCollector())
        self.events = Counter(
            "memoryos_events",
            "Events processed per stage and outcome",
            ["stage", "outcome"],
            registry=r,
        )
        self.stage_seconds = Histogram(
            "memoryos_stage_duration_seconds",
            "Time to process one event per stage",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_size = Histogram(
            "memoryos_stage_batch_size",
            "Events taken at once per stage",
            ["stage"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.dead_letters = Counter(
            "memoryos_dead_letters",
            "Records sent to the dead-letter topic",
            ["stage", "reason"],
            registry=r,
        )
        self.events_out = Counter(
            "memoryos_events_out",
            "Events put on memoryos.events, per type",
            ["type"],
            registry=r,
        )
        self.webhook_deliveries = Counter(
            "memoryos_webhook_deliveries",
            "Webhook attempts per webhook (its host) and outcome: delivered, retried, dead_letter",
            ["webhook", "outcome"],
            registry=r,
        )
        self.webhook_seconds = Histogram(
            "memoryos_webhook_request_duration_seconds",
            "Time of one webhook request, answered or not",
            ["webhook"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.produced_bytes = Counter(
            "memoryos_produced_bytes",
            "Bytes of record values sent to each pipeline topic and table changelog",
            ["topic"],
            registry=r,
        )
        self.produced_records = Counter(
            "memoryos_produced_records",
            "Records sent to each pipeline topic and table changelog",
            ["topic"],
            registry=r,
        )
        self.transitions = Counter(
            "memoryos_memory_transitions",
            "Memory tier transitions (stm_in, stm_to_mtm, segment_created, segment_merged, "
            "segment_evicted, persona_update)",
            ["transition"],
            registry=r,
        )
        self.in_flight = Gauge(
            "memoryos_in_flight", "Work in flight per stage", ["stage"], registry=r
        )
        self.llm_requests = Counter(
            "memoryos_llm_requests",
            "LLM calls per task and outcome",
            ["task", "outcome"],
            registry=r,
        )
        self.llm_seconds = Histogram(
            "memoryos_llm_request_duration_seconds",
            "LLM call latency per task",
            ["task"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.llm_tokens = Counter(
            "memoryos_llm_tokens",
            "LLM tokens per task and kind (prompt, completion)",
            ["task", "kind"],
            registry=r,
        )
        self.embed_batch = Histogram(
            "memoryos_embedding_batch_size",
            "Texts per embedding call",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.embed_seconds = Histogram(
            "memoryos_embedding_duration_seconds",
            "Embedding call latency",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.store_seconds = Histogram(
            "memoryos_store_operation_duration_seconds",
            "Vector store latency per operation",
            ["operation"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.request_seconds = Histogram(
            "memoryos_request_duration_seconds",
            "HTTP API latency per route (retrieve, respond...)",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.consumer_lag = Gauge(
            "memoryos_consumer_lag",
            "Records not yet processed per topic and partition",
            ["topic", "partition"],
            registry=r,
        )
        self.disk_free = Gauge(
            "memoryos_disk_free_bytes",
            "Free bytes under the data folder, read at each write and each readiness probe",
            registry=r,
        )
        self.disk_floor = Gauge(
            "memoryos_disk_floor_bytes",
            "Free bytes under which writes are refused (MEMORYOS_MIN_FREE_MB)",
            registry=r,
        )
        self.broker_rolls = Counter(
            "memoryos_broker_rolls",
            "Log rolls of the embedded broker per outcome (done; failed: tried again)",
            ["outcome"],
            registry=r,
        )
        for outcome in ("done", "failed"):  # exported at 0, so a first failure is an increase
            self.broker_rolls.labels(outcome=outcome)
        self.visits_lost = Counter(
            "memoryos_retrieval_visits_lost",
            "Retrieval visits not recorded: their send failed (send), too many were waiting "
            "(backlog), or the process stopped first (stopped)",
            ["reason"],
            registry=r,
        )
        for reason in ("send", "backlog", "stopped"):  # at 0: a first loss is an increase
            self.visits_lost.labels(reason=reason)
        self.journal_settled = Counter(
            "memoryos_journal_settled",
            "Journaled turns the reconciler settled: stored (their page is) or passed (no page, "
            "but a later turn of the user is stored: dead-lettered, evicted, or lost)",
            ["how"],
            registry=r,
        )
        for how in ("stored", "passed"):
            self.journal_settled.labels(how=how)
        self.tenant_tokens = Counter(
            "memoryos_tenant_llm_tokens",
            "LLM tokens spent on behalf of each tenant (the first 100 tenants by name, the rest "
            "as other)",
            ["tenant"],
            registry=r,
        )
        self.llm_deferred = Counter(
            "memoryos_llm_deferred",
            "Pipeline LLM calls that waited for the next day: their tenant had spent its "
            "MEMORYOS_TOKENS_PER_DAY",
            ["tenant"],
            registry=r,
        )
        self.rate_limited = Counter(
            "memoryos_rate_limited",
            "Requests refused (429) because their key was over its rate; tenant: the key's "
            "(the first 100 tenants by name, the rest as other)",
            ["tenant"],
            registry=r,
        )
