"""The one Settings object: built once at start-up and passed down.

Nothing else in the project reads the environment. Every MemoryOS parameter defaults to the
paper's value (arXiv 2506.06326, section 3); where we depart from the paper on purpose, the
departure is a setting whose paper value is available.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory.heat import HeatParams
from schemas.errors import ConfigError

ENV_PREFIX = "MEMORYOS_"
# host:port, the host a name, an IPv4 address or a bracketed IPv6 address
_BROKER_ADDRESS = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}")


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
    mtm_retrieval: Literal["paper", "fused"] = Field(
        "fused",
        description="paper: top k pages of the top m segments; fused: that ranking fused (RRF) "
        "with a hybrid search over all the user's MTM pages",
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
    llm: Literal["offline", "openai"] = Field("offline", description="LLM backend")
    llm_model: str = Field("gpt-4o-mini", min_length=1, description="chat model name")
    llm_timeout_s: float = Field(60.0, gt=0.0, description="per-call timeout, seconds")
    llm_max_retries: int = Field(5, ge=0, le=20, description="retries on 429/5xx/timeouts")
    llm_backoff_base_s: float = Field(0.5, ge=0.0, description="first backoff, seconds")
    llm_backoff_max_s: float = Field(30.0, ge=0.0, description="longest backoff, seconds")
    llm_max_in_flight: int = Field(16, ge=1, le=4096, description="LLM calls in flight")
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
    embedder: Literal["minilm", "openai"] = Field("minilm", description="embedding backend")
    embedding_model: str = Field(
        "text-embedding-3-small", min_length=1, description="model for embedder=openai"
    )
    embedding_dim: int = Field(384, ge=1, le=8192, description="vector size (minilm: 384)")
    embedding_batch_size: int = Field(64, ge=1, le=4096, description="texts per embedding call")
    store: Literal["edge", "qdrant"] = Field("edge", description="vector store backend")
    qdrant_url: str = Field(
        ":memory:", min_length=1, description="store=qdrant: server URL, a path or :memory:"
    )
    qdrant_api_key: SecretStr | None = Field(None, description="store=qdrant: server API key")
    data_dir: Path = Field(Path(".memoryos"), description="embedded data folder")

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

    # --- service ---
    host: str = Field("127.0.0.1", description="HTTP bind address")
    port: int = Field(8080, ge=0, le=65535, description="HTTP port")
    api_keys: SecretStr = Field(
        SecretStr(""), description="comma-separated bearer keys; empty: no auth"
    )
    mcp_host: str = Field(
        "127.0.0.1", description="`memoryos mcp --transport http` bind address (loopback)"
    )
    max_body_bytes: int = Field(1_048_576, ge=1024, description="largest HTTP body accepted")

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

    @property
    def heat_params(self) -> HeatParams:
        return HeatParams(self.heat_alpha, self.heat_beta, self.heat_gamma, self.heat_mu)

    @property
    def api_key_list(self) -> list[str]:
        keys = _reveal(self.api_keys) or ""
        return [key.strip() for key in keys.split(",") if key.strip()]

    @property
    def openai_key(self) -> str | None:
        return _reveal(self.openai_api_key)

    @property
    def qdrant_key(self) -> str | None:
        return _reveal(self.qdrant_api_key)


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
