"""The one Settings object: built once at start-up and passed down.

Nothing else in the project reads the environment. Every MemoryOS parameter defaults to the
paper's value (arXiv 2506.06326, section 3); where we depart from the paper on purpose, the
departure is a setting whose paper value is available.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    FilePath,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory.heat import HeatParams
from schemas.errors import ConfigError
from schemas.tenants import parse_limit
from schemas.webhooks import MAX_WEBHOOKS, Webhook

ENV_PREFIX = "MEMORYOS_"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})  # hosts that need no API key
MtmRetrieval = Literal["paper", "fused", "structured"]
# host:port, the host a name, an IPv4 address or a bracketed IPv6 address
_BROKER_ADDRESS = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}")
_WEBHOOKS = TypeAdapter(list[Webhook])


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="ignore",
        frozen=True,
        populate_by_name=True,
    )

    # --- MemoryOS parameters (paper defaults) ---
    stm_capacity: int = Field(7, ge=1, le=1000, description="STM pages per user (FIFO)")
    mtm_capacity: int = Field(200, ge=1, le=100_000, description="MTM segments per user")
    theta: float = Field(0.6, ge=0.0, le=2.0, description="F-score threshold to join a segment")
    heat_alpha: float = Field(1.0, ge=0.0, description="heat weight of N_visit")
    heat_beta: float = Field(1.0, ge=0.0, description="heat weight of L_interaction")
    heat_gamma: float = Field(1.0, ge=0.0, description="heat weight of recency")
    heat_mu: float = Field(1e7, gt=0.0, description="recency time constant, seconds")
    heat_tau: float = Field(5.0, ge=0.0, description="heat above which a segment updates LPM")
    user_kb_capacity: int = Field(100, ge=1, le=100_000, description="user KB facts (FIFO)")
    agent_traits_capacity: int = Field(100, ge=1, le=100_000, description="agent traits (FIFO)")
    retrieve_segments: int = Field(5, ge=1, le=200, description="top m segments by F")
    retrieve_pages: int = Field(10, ge=1, le=1000, description="top k pages inside them")
    retrieve_lpm: int = Field(10, ge=1, le=1000, description="top user KB / agent traits")
    filter_meta_keys: str = Field(
        "",
        pattern=r"^(?:[A-Za-z0-9_-]{1,64}(?:,[A-Za-z0-9_-]{1,64}){0,19})?$",
        description="comma-separated top-level keys of the turns' meta that a retrieve may "
        "filter on (filters.meta): each is indexed in the store; up to 20",
    )
    mtm_retrieval: MtmRetrieval = Field(
        "structured",
        description="paper: top k pages of the top m segments by semantic similarity; fused: "
        "that ranking (hybrid) fused (RRF) with a lexical search over all the user's MTM pages; "
        "structured: every page of the user scored by lexical + dense evidence, spread to the "
        "neighbouring pages of its session (memory/ranking.py)",
    )
    segment_vector: Literal["centroid", "summary"] = Field(
        "centroid",
        description="segment embedding: mean of its page vectors, or the summary's embedding",
    )

    answer_style: Literal["chat", "locomo"] = Field(
        "chat",
        description="respond: chat = a reply to the customer in full sentences; locomo = the "
        "paper's benchmark answer style (concise entities, dates as '17 July 2025')",
    )

    pairing_wait_s: float = Field(
        120.0,
        gt=0.0,
        description="how long a customer message waits for the assistant's reply before it "
        "becomes a turn with an empty response (checked every MEMORYOS_RECONCILE_INTERVAL_S)",
    )

    # --- backends ---
    llm: Literal["offline", "openai"] = Field(
        "offline",
        description="offline: no model (extractive summaries, a keyword persona, answers "
        "quoted from memory); openai: any OpenAI-compatible server",
    )
    offline_keywords: Literal["yake", "content"] = Field(
        "content",
        description="offline LLM topic keywords: yake's top phrases, or (content) yake's "
        "phrases without chit-chat, then the dates said",
    )
    llm_model: str = Field("gpt-4o-mini", min_length=1, description="chat model name")
    llm_timeout_s: float = Field(
        60.0, gt=0.0, description="each attempt's timeout, seconds, to the last byte of its answer"
    )
    llm_max_retries: int = Field(5, ge=0, le=20, description="retries on 429/5xx/timeouts")
    llm_backoff_base_s: float = Field(0.5, ge=0.0, description="first backoff, seconds")
    llm_backoff_max_s: float = Field(30.0, ge=0.0, description="longest backoff, seconds")
    llm_max_in_flight: int = Field(16, ge=1, le=4096, description="LLM calls in flight")
    tokens_per_day: int = Field(
        0,
        ge=0,
        description="LLM tokens each tenant may spend per UTC day (its respond calls and the "
        "pipeline's work for its users); over it respond answers 429 and the pipeline's LLM "
        "work for that tenant waits for the next day. 0: no budget",
    )
    # Keys are SecretStr: repr, logs and error messages show ********** instead.
    openai_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("MEMORYOS_OPENAI_API_KEY", "OPENAI_API_KEY"),
        description="API key (the standard OPENAI_API_KEY also works)",
    )
    openai_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("MEMORYOS_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
        description="OpenAI-compatible endpoint (the standard OPENAI_BASE_URL also works)",
    )
    embedder: Literal["minilm", "openai"] = Field(
        "minilm",
        description="minilm: all-MiniLM-L6-v2 on this machine's CPU; openai: an "
        "OpenAI-compatible embeddings endpoint",
    )
    embedding_model: str = Field(
        "text-embedding-3-small", min_length=1, description="model for embedder=openai"
    )
    embedding_dim: int = Field(384, ge=1, le=8192, description="vector size (minilm: 384)")
    embedding_batch_size: int = Field(64, ge=1, le=4096, description="texts per embedding call")
    minilm_runtime: Literal["onnx", "torch"] = Field(
        "onnx",
        description="embedder=minilm: ONNX Runtime (exported from the bundled model once, the "
        "same vectors, faster) or torch",
    )
    minilm_precision: Literal["auto", "fp32", "int8"] = Field(
        "auto",
        description="embedder=minilm: auto (a store keeps the precision that made its vectors; "
        "a new store gets int8 on ONNX Runtime, fp32 on torch), fp32 (the model as published) "
        "or int8 (its weights quantized by ONNX Runtime: about half the CPU per text, slightly "
        "different vectors; needs MEMORYOS_MINILM_RUNTIME=onnx)",
    )
    minilm_threads: int = Field(
        0,
        ge=0,
        le=256,
        description="embedder=minilm on ONNX Runtime: each model call runs on one thread; a "
        "batch of more than 8 texts runs its chunks on this many threads at once (0: one per "
        "core, at most 4)",
    )
    minilm_host: Literal["process", "thread"] = Field(
        "process",
        description="embedder=minilm: where the model runs: a child process of its own (its "
        "Python work never holds this process's GIL, which the event loop needs) or a thread "
        "of this process",
    )
    model_cache_dir: Path | None = Field(
        None,
        description="where the MiniLM ONNX export is kept (empty: $XDG_CACHE_HOME/memoryos or "
        "~/.cache/memoryos)",
    )
    store: Literal["edge", "qdrant"] = Field(
        "edge",
        description="edge: Qdrant Edge in the data folder (one process); qdrant: a Qdrant "
        "server at MEMORYOS_QDRANT_URL (what `memoryos worker` and `serve` need to share it)",
    )
    qdrant_url: str = Field(
        ":memory:", min_length=1, description="store=qdrant: server URL, a path or :memory:"
    )
    qdrant_api_key: SecretStr | None = Field(None, description="store=qdrant: server API key")
    edge_search_threads: int = Field(
        1,
        ge=0,
        le=256,
        description="store=edge: threads each collection's searches use (0: one per core, "
        "Edge's default; 1 is faster for the few hundred points of one user)",
    )
    edge_page_payloads: Literal["cold", "cached"] = Field(
        "cold",
        description="store=edge: how the pages' payloads are written: cold (Edge's default) or "
        "cached (kept mapped in memory: faster pool searches in a big store, none in a small one, "
        "at the cost of more file-backed memory; docs/benchmarks.md); Edge fixes it when it "
        "creates a segment, so set it before the store's first start: an existing store changes "
        "only where a vacuum rewrites a segment",
    )
    edge_field_cache_points: int = Field(
        32_768,
        ge=0,
        le=10_000_000,
        description="store=edge: pages whose ranking fields (seq, timestamp, segment) are kept in "
        "memory for the retrieve's pool searches, about 0.5 KB each (0: read from Edge each time)",
    )
    data_dir: Path = Field(
        Path(".memoryos"),
        description="the local data folder: the Edge store, the journal, the embedded broker's log",
    )
    min_free_mb: int = Field(
        256,
        ge=0,
        description="free MiB the data folder keeps: under it writes answer 503 and /readyz "
        "is not ready, and `memoryos up` refuses to start (the store's log segments are 32 "
        "MiB per collection, mapped; a full disk would kill the process)",
    )

    # --- broker and pipeline ---
    broker_url: str | None = Field(
        None,
        description="host:port[,host:port] (or kafka://...) of an existing Kafka; "
        "empty: embedded broker",
    )
    broker_port: int = Field(9092, ge=1, le=65535, description="embedded broker port")
    topic_partitions: int = Field(4, ge=1, le=1024, description="partitions per topic")
    topic_replication_factor: int = Field(
        1, ge=1, le=16, description="replicas per topic (3 on a production Kafka cluster)"
    )
    drain_timeout_s: float = Field(
        30.0, ge=0.0, description="on stop, how long to wait for work in flight to finish"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="log level of the memoryos processes"
    )
    batch_size: int = Field(64, ge=1, le=10_000, description="events an agent takes at once")
    batch_timeout_s: float = Field(0.05, gt=0.0, description="longest wait to fill a batch")
    llm_run_max: int = Field(
        8,
        ge=1,
        le=64,
        description="a user's queued evicted pages the MTM stage places together: one topics "
        "call for them all and one summary call per segment they joined (1: one page at a "
        "time, a summary call per merge, as the paper)",
    )
    llm_combine: bool = Field(
        True,
        description="one LLM call where the paper asks several about the same text: a page's "
        "topics and the updated summary of the segment it most likely joins; a hot segment's "
        "user traits, user knowledge and assistant knowledge (false: a call each, the paper)",
    )
    continuity_llm: Literal["always", "unclear"] = Field(
        "unclear",
        description="ask the LLM whether a page continues its chain: always (the paper), or "
        "only when the embedding and keyword signals are unclear (fewer LLM calls)",
    )
    continuity_clear_low: float = Field(
        0.15, ge=-1.0, le=1.0, description="at or below: clearly a new chain (without the LLM)"
    )
    continuity_clear_high: float = Field(
        0.6, ge=-1.0, le=1.0, description="at or above: clearly the same chain (without the LLM)"
    )
    max_pending_events: int = Field(
        512,
        ge=1,
        le=100_000,
        description="events a stage has accepted and not finished (users run concurrently, "
        "each user's events in order); more waits: backpressure on the consumer",
    )
    dlq_max_attempts: int = Field(3, ge=1, le=100, description="tries before dead-lettering")
    reconcile_interval_s: float = Field(
        60.0,
        gt=0.0,
        description="how often the reconciler re-sends work stuck since its previous pass",
    )
    journal: Literal["auto", "on", "off"] = Field(
        "auto",
        description="the on-disk turn inbox; auto = on with the embedded broker (it keeps "
        "nothing on disk), off with a real Kafka (acks=all is durable)",
    )
    consumer_session_timeout_s: float = Field(
        6.0, ge=1.0, description="Kafka consumer session timeout"
    )
    consumer_rebalance_timeout_s: float = Field(
        3.0, ge=1.0, description="how long a rebalance waits for members (also the first join)"
    )
    consumer_fetch_max_wait_ms: int = Field(
        100, ge=1, le=10_000, description="longest a consumer fetch waits for new records"
    )
    app_id: str = Field("memoryos", min_length=1, description="Faust app id / consumer group")
    # --- retention and bounded memory (docs/operations.md) ---
    turns_retention_s: int = Field(
        86_400,
        ge=600,
        description="how long memoryos.turns keeps records: after a DELETE the user's text "
        "stays in Kafka at most this long (plus one segment)",
    )
    stage_retention_s: int = Field(
        86_400,
        ge=600,
        description="how long the internal stage topics keep records (the reconciler "
        "re-derives their work from the store; this is for an operator to look)",
    )
    dlq_retention_s: int = Field(
        1_209_600, ge=3600, description="how long memoryos.dlq keeps dead letters"
    )
    topic_segment_s: int = Field(
        3600,
        ge=60,
        description="longest a topic segment stays open: retention deletes whole segments, "
        "so a record can outlive its retention by this much",
    )
    broker_memory_budget_mb: int = Field(
        400,
        ge=0,
        description="embedded broker: past this RSS it is restarted (writes refused with 503 "
        "and Retry-After for about 5 s, fresh broker and worker, reconcile); 0: never",
    )
    broker_check_interval_s: float = Field(
        5.0, gt=0.0, description="how often the embedded broker's memory is checked"
    )
    # Qdrant Edge has no background optimizer: deleted points keep their space until a
    # vacuum (adapters/stores/edge.py)
    store_vacuum_interval_s: float = Field(
        300.0,
        ge=0.0,
        description="embedded store (Qdrant Edge): how often collections with many deleted "
        "points are rewritten to reclaim their memory and disk; 0: never",
    )

    # --- Kafka security: one set for every client (Faust, producers, CLI, lag probe) ---
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="how every Kafka client talks to MEMORYOS_BROKER_URL"
    )
    kafka_ssl_cafile: FilePath | None = Field(
        None, description="PEM CA bundle that signed the brokers' certificates; unset: system CAs"
    )
    kafka_ssl_certfile: FilePath | None = Field(
        None, description="PEM client certificate, for brokers that require mutual TLS"
    )
    kafka_ssl_keyfile: FilePath | None = Field(None, description="PEM key of the client cert")
    kafka_ssl_key_password: SecretStr | None = Field(
        None, description="password of an encrypted client key"
    )
    kafka_ssl_check_hostname: bool = Field(
        True, description="check that a broker's certificate names the host dialled"
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        "PLAIN", description="SASL mechanism (SASL_* protocols)"
    )
    kafka_sasl_username: str | None = Field(None, description="SASL user name")
    kafka_sasl_password: SecretStr | None = Field(None, description="SASL password")

    # --- service ---
    host: str = Field("127.0.0.1", description="HTTP bind address")
    port: int = Field(8080, ge=0, le=65535, description="HTTP port")
    api_keys: SecretStr = Field(
        SecretStr(""),
        description="comma-separated bearer keys for /v1; empty: no auth, allowed only while "
        "MEMORYOS_HOST is a loopback address",
    )
    rate_limit: str = Field(
        "",
        description="requests per second each API key may make, as RATE or RATE/BURST (e.g. "
        "20/50); over it a request gets 429 with Retry-After. A key made with its own rate "
        "keeps that one. Empty: no limit",
    )
    mcp_key: SecretStr | None = Field(
        None,
        description="`memoryos mcp --transport stdio`: the key its tool calls carry (a tenant's "
        "key); unset: the first of MEMORYOS_API_KEYS",
    )
    mcp_host: str = Field(
        "127.0.0.1", description="`memoryos mcp --transport http` bind address (loopback)"
    )
    max_body_bytes: int = Field(1_048_576, ge=1024, description="largest HTTP body accepted")

    # --- tracing (OpenTelemetry's standard variables, read here like OPENAI_API_KEY) ---
    otel_exporter_otlp_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices(
            "MEMORYOS_OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"
        ),
        description="OTLP/HTTP base URL (spans go to <url>/v1/traces); empty: tracing off",
    )
    otel_exporter_otlp_traces_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices(
            "MEMORYOS_OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        ),
        description="full OTLP/HTTP traces URL; overrides the base endpoint",
    )
    otel_exporter_otlp_protocol: Literal["http/protobuf"] = Field(
        "http/protobuf",
        validation_alias=AliasChoices(
            "MEMORYOS_OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"
        ),
        description="OTLP transport; only http/protobuf is built in",
    )
    otel_service_name: str | None = Field(
        None,
        validation_alias=AliasChoices("MEMORYOS_OTEL_SERVICE_NAME", "OTEL_SERVICE_NAME"),
        description="service.name of the spans; default memoryos-<role>",
    )
    otel_sdk_disabled: bool = Field(
        False,
        validation_alias=AliasChoices("MEMORYOS_OTEL_SDK_DISABLED", "OTEL_SDK_DISABLED"),
        description="true: no tracing even with an endpoint set",
    )

    events_include_text: bool = Field(
        False,
        description="true: memoryos.events and webhooks carry the user's words (see Security)",
    )
    webhooks: SecretStr = Field(
        SecretStr(""),
        description='JSON list of {"url", "secret": "whsec_...", "types": [...]}: signed '
        "POSTs of memoryos.events (Standard Webhooks)",
    )
    webhook_timeout_s: float = Field(
        10.0, gt=0.0, le=300.0, description="one webhook request's limit, seconds"
    )
    webhook_attempts: int = Field(
        6, ge=1, le=30, description="tries of one event per webhook before dead-lettering"
    )
    webhook_backoff_s: float = Field(
        1.0, ge=0.0, le=3600.0, description="first wait between tries; x4 each time, 1 h at most"
    )

    @field_validator("webhooks")
    @classmethod
    def _webhooks_form(cls, value: SecretStr) -> SecretStr:
        _parse_webhooks(value.get_secret_value())  # ValueError says which entry and why
        return value

    @field_validator("model_cache_dir", mode="before")
    @classmethod
    def _empty_is_default(cls, value: object) -> object:
        """Empty: the default. ``~`` expanded and a relative folder made absolute here, so
        the cache does not move with the working directory (nor create a folder named ~)."""
        if isinstance(value, str):
            if not value.strip():
                return None
            value = Path(value.strip())
        if isinstance(value, Path):
            return value.expanduser().absolute()
        return value

    @field_validator("rate_limit")
    @classmethod
    def _rate_limit_form(cls, value: str) -> str:
        parse_limit(value)  # ValueError names the form
        return value.strip()

    @field_validator("broker_url")
    @classmethod
    def _broker_scheme(cls, value: str | None) -> str | None:
        """``host:port[,host:port]`` (what every Kafka tool takes) or ``kafka://`` the same;
        kept as ``kafka://...``, the form Faust wants and the code strips for aiokafka."""
        if value in (None, ""):
            return None
        servers = value.removeprefix("kafka://").split(",")
        if not all(_BROKER_ADDRESS.fullmatch(server.strip()) for server in servers):
            raise ValueError("must look like host:port[,host:port] or kafka://host:port[,...]")
        return "kafka://" + ",".join(server.strip() for server in servers)

    @model_validator(mode="after")
    def _openai_needs_key(self) -> Settings:
        uses_openai = self.llm == "openai" or self.embedder == "openai"
        if uses_openai and not (self.openai_api_key or self.openai_base_url):
            raise ValueError(
                "MEMORYOS_LLM=openai or MEMORYOS_EMBEDDER=openai needs OPENAI_API_KEY "
                "or OPENAI_BASE_URL"
            )
        return self

    @model_validator(mode="after")
    def _int8_needs_onnx(self) -> Settings:
        if self.minilm_precision == "int8" and self.minilm_runtime != "onnx":
            raise ValueError(
                "MEMORYOS_MINILM_PRECISION=int8 needs MEMORYOS_MINILM_RUNTIME=onnx (the int8 "
                "graph is ONNX Runtime's quantization of the exported one)"
            )
        return self

    @model_validator(mode="after")
    def _kafka_security_is_whole(self) -> Settings:
        # A setting that would be silently ignored is refused: a deployment that sets a CA
        # file but forgets SSL in the protocol would otherwise send turns in clear text.
        protocol = self.kafka_security_protocol
        uses_tls, uses_sasl = "SSL" in protocol, protocol.startswith("SASL")
        if protocol != "PLAINTEXT" and not self.broker_url:
            raise ValueError(
                f"MEMORYOS_KAFKA_SECURITY_PROTOCOL={protocol} needs MEMORYOS_BROKER_URL: the "
                "embedded broker listens on 127.0.0.1 in plaintext"
            )
        tls_files = (self.kafka_ssl_cafile, self.kafka_ssl_certfile, self.kafka_ssl_keyfile)
        if not uses_tls and any(tls_files):
            raise ValueError(
                "MEMORYOS_KAFKA_SSL_* files need MEMORYOS_KAFKA_SECURITY_PROTOCOL=SSL or SASL_SSL"
            )
        if (self.kafka_ssl_certfile is None) != (self.kafka_ssl_keyfile is None):
            raise ValueError(
                "MEMORYOS_KAFKA_SSL_CERTFILE and MEMORYOS_KAFKA_SSL_KEYFILE go together"
            )
        has_login = bool(self.kafka_sasl_username or _reveal(self.kafka_sasl_password))
        if uses_sasl and not (self.kafka_sasl_username and _reveal(self.kafka_sasl_password)):
            raise ValueError(
                f"MEMORYOS_KAFKA_SECURITY_PROTOCOL={protocol} needs MEMORYOS_KAFKA_SASL_USERNAME "
                "and MEMORYOS_KAFKA_SASL_PASSWORD"
            )
        if has_login and not uses_sasl:
            raise ValueError(
                "MEMORYOS_KAFKA_SASL_USERNAME/PASSWORD need MEMORYOS_KAFKA_SECURITY_PROTOCOL="
                "SASL_SSL or SASL_PLAINTEXT"
            )
        return self

    @property
    def otlp_traces_endpoint(self) -> str | None:
        """Where spans go, by the OTLP exporter rules; None: tracing is off."""
        if self.otel_sdk_disabled:
            return None
        if self.otel_exporter_otlp_traces_endpoint:
            return self.otel_exporter_otlp_traces_endpoint
        base = self.otel_exporter_otlp_endpoint
        return f"{base.rstrip('/')}/v1/traces" if base else None

    @property
    def model_cache_path(self) -> Path:
        if self.model_cache_dir is not None:
            return self.model_cache_dir
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "memoryos"

    @property
    def meta_filter_keys(self) -> tuple[str, ...]:
        return tuple(key for key in self.filter_meta_keys.split(",") if key)

    @property
    def webhook_list(self) -> list[Webhook]:
        return _parse_webhooks(self.webhooks.get_secret_value())

    @property
    def heat_params(self) -> HeatParams:
        return HeatParams(self.heat_alpha, self.heat_beta, self.heat_gamma, self.heat_mu)

    @property
    def api_key_list(self) -> list[str]:
        keys = _reveal(self.api_keys) or ""
        return [key.strip() for key in keys.split(",") if key.strip()]

    @property
    def mcp_key_secret(self) -> str | None:
        return _reveal(self.mcp_key)

    @property
    def openai_key(self) -> str | None:
        return _reveal(self.openai_api_key)

    @property
    def qdrant_key(self) -> str | None:
        return _reveal(self.qdrant_api_key)

    @property
    def kafka_sasl_secret(self) -> str | None:
        return _reveal(self.kafka_sasl_password)

    @property
    def kafka_ssl_key_secret(self) -> str | None:
        return _reveal(self.kafka_ssl_key_password)


# How docs/configuration.md shows the settings (adapters/settings_doc.py): the groups a deployer
# sets first, then the advanced group, whose defaults are the measured best. Every setting is in
# exactly one group (tests/unit/test_settings.py).
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Broker",
        "Where the pipeline's topics live: the embedded broker by default, or a Kafka cluster.",
        ("broker_url", "broker_port", "topic_partitions", "topic_replication_factor", "app_id"),
    ),
    (
        "Store",
        "Where memory is kept: Qdrant Edge in the data folder by default, or a Qdrant server.",
        ("store", "qdrant_url", "qdrant_api_key", "data_dir", "min_free_mb", "journal"),
    ),
    (
        "LLM",
        "The model that summarises, extracts the persona and answers: offline by default (no "
        "model), or any OpenAI-compatible server.",
        (
            "llm",
            "llm_model",
            "openai_api_key",
            "openai_base_url",
            "llm_timeout_s",
            "llm_max_retries",
            "llm_max_in_flight",
            "tokens_per_day",
            "answer_style",
        ),
    ),
    (
        "Embedder",
        "The text embedder: MiniLM on this machine's CPU by default, or OpenAI's embeddings.",
        ("embedder", "embedding_model", "embedding_dim", "model_cache_dir"),
    ),
    (
        "Service",
        "The HTTP API and MCP server, and how the pipeline paces its own work.",
        (
            "host",
            "port",
            "mcp_host",
            "max_body_bytes",
            "pairing_wait_s",
            "reconcile_interval_s",
            "drain_timeout_s",
            "log_level",
        ),
    ),
    (
        "Security",
        "API keys, and how every Kafka client authenticates and encrypts.",
        (
            "api_keys",
            "rate_limit",
            "mcp_key",
            "kafka_security_protocol",
            "kafka_ssl_cafile",
            "kafka_ssl_certfile",
            "kafka_ssl_keyfile",
            "kafka_ssl_key_password",
            "kafka_ssl_check_hostname",
            "kafka_sasl_mechanism",
            "kafka_sasl_username",
            "kafka_sasl_password",
        ),
    ),
    (
        "Memory",
        "The paper's parameters (arXiv 2506.06326, section 3), each defaulting to the paper's "
        "value, and the departures from it, each with the paper's way as one of its values.",
        (
            "stm_capacity",
            "mtm_capacity",
            "theta",
            "heat_alpha",
            "heat_beta",
            "heat_gamma",
            "heat_mu",
            "heat_tau",
            "user_kb_capacity",
            "agent_traits_capacity",
            "retrieve_segments",
            "retrieve_pages",
            "retrieve_lpm",
            "filter_meta_keys",
            "mtm_retrieval",
            "segment_vector",
            "llm_combine",
            "llm_run_max",
            "continuity_llm",
        ),
    ),
    (
        "Retention and bounded memory",
        "How long records stay, and what keeps the embedded stack's memory bounded.",
        (
            "turns_retention_s",
            "stage_retention_s",
            "dlq_retention_s",
            "topic_segment_s",
            "broker_memory_budget_mb",
            "store_vacuum_interval_s",
        ),
    ),
    (
        "Events out",
        "The public stream of memory changes (memoryos.events, CloudEvents) and its signed "
        "webhooks.",
        (
            "webhooks",
            "events_include_text",
            "webhook_timeout_s",
            "webhook_attempts",
            "webhook_backoff_s",
        ),
    ),
    (
        "Tracing",
        "OpenTelemetry's standard variables, read with or without the MEMORYOS_ prefix.",
        (
            "otel_exporter_otlp_endpoint",
            "otel_exporter_otlp_traces_endpoint",
            "otel_exporter_otlp_protocol",
            "otel_service_name",
            "otel_sdk_disabled",
        ),
    ),
    (
        "Advanced",
        "Tuning. The defaults are the values measured best on the benchmarks "
        "(docs/benchmarks.md); change one only to trade as its line says.",
        (
            "llm_backoff_base_s",
            "llm_backoff_max_s",
            "offline_keywords",
            "embedding_batch_size",
            "minilm_runtime",
            "minilm_precision",
            "minilm_threads",
            "minilm_host",
            "edge_search_threads",
            "edge_page_payloads",
            "edge_field_cache_points",
            "batch_size",
            "batch_timeout_s",
            "max_pending_events",
            "dlq_max_attempts",
            "continuity_clear_low",
            "continuity_clear_high",
            "consumer_session_timeout_s",
            "consumer_rebalance_timeout_s",
            "consumer_fetch_max_wait_ms",
            "broker_check_interval_s",
        ),
    ),
)


def _parse_webhooks(text: str) -> list[Webhook]:
    if not text.strip():
        return []
    try:
        hooks = _WEBHOOKS.validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(
            f"entry {'.'.join(str(part) for part in e['loc']) or 'list'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors(include_url=False)
        )
        raise ValueError(problems) from None
    if len(hooks) > MAX_WEBHOOKS:
        raise ValueError(f"at most {MAX_WEBHOOKS} webhooks, not {len(hooks)}")
    return hooks


def _reveal(value: SecretStr | str | None) -> str | None:
    # model_copy(update=...) skips validation, so a plain str can sit in a SecretStr field
    secret = value.get_secret_value() if isinstance(value, SecretStr) else value
    return secret or None


def load_settings(**overrides: Any) -> Settings:
    """Build Settings from the environment (and overrides), or raise ConfigError.

    The message names each offending environment variable and what it allows, so a
    mistyped deployment stops at start-up instead of misbehaving later. It never repeats the
    value: the input of a whole-settings rule is every setting, API keys included.
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = [str(part) for part in error["loc"]]
            variable = ENV_PREFIX + where[0].upper() if where else "settings"
            problems.append(f"{variable}: {error['msg']}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from None
