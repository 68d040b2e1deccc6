"""How long each topic keeps data: requested when a topic is created, and in deploy/.

- ``memoryos.turns`` holds the text as producers sent it. Its retention is short
  (``MEMORYOS_TURNS_RETENTION_S``, 1 day): after a DELETE the user's text stays in Kafka at most
  that long plus one segment (Kafka cannot delete one record earlier).
- The stage topics (pages, mtm, persona) carry the same text, so they default to the same bound
  (``MEMORYOS_STAGE_RETENTION_S``). Nothing of value lives only there: the reconciler re-derives
  their work from the store; the retention is for an operator to look at what passed.
- Table changelogs are compacted: the latest value per user is the table. A forgotten user's
  key gets a tombstone, and ``max.compaction.lag.ms`` makes compaction drop the older values
  within the turns' retention, so the changelogs keep the same privacy bound.
- ``memoryos.dlq`` keeps dead letters longer (``MEMORYOS_DLQ_RETENTION_S``, 14 days): an
  operator must be able to read and replay them. Dead letters carry text: the one exception to
  the bound above, said so in docs/operations.md ("How long each topic keeps data").
- Retention and compaction act on closed segments only, so every topic closes a segment at
  least every ``MEMORYOS_TOPIC_SEGMENT_S``: otherwise a quiet partition keeps its records.

The embedded Tansu broker records these settings but never expires anything; the stack bounds
its memory by recycling it (``streams/roll.py``).
"""

from __future__ import annotations

import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from adapters.settings import Settings
from schemas.topics import DLQ, EVENTS, MESSAGES, MTM, PAGES, PERSONA, TURNS
from streams.kafka_security import kafka_client_options

log = logging.getLogger(__name__)
TABLES = ("pairing-pending", "chain-tails", "stm-windows", "mtm-heat")
TopicConfig = dict[str, str]
TOPIC_ALREADY_EXISTS = 36  # Kafka protocol error code


def changelog_topic(app_id: str, table: str) -> str:
    """Faust's name for a table's changelog topic."""
    return f"{app_id}-{table}-changelog"


def _ms(seconds: int) -> str:
    return str(seconds * 1000)


def deleting(settings: Settings, retention_s: int) -> TopicConfig:
    return {
        "cleanup.policy": "delete",
        "retention.ms": _ms(retention_s),
        "segment.ms": _ms(min(settings.topic_segment_s, retention_s)),
    }


def compacted(settings: Settings) -> TopicConfig:
    return {
        "cleanup.policy": "compact",
        "max.compaction.lag.ms": _ms(settings.turns_retention_s),
        "segment.ms": _ms(min(settings.topic_segment_s, settings.turns_retention_s)),
    }


def topic_configs(settings: Settings) -> dict[str, TopicConfig]:
    """Every topic the app creates, with the configuration it is created with."""
    stage = deleting(settings, settings.stage_retention_s)
    configs = {
        TURNS: deleting(settings, settings.turns_retention_s),
        MESSAGES: deleting(settings, settings.turns_retention_s),  # the same text as turns
        PAGES: stage,
        MTM: stage,
        PERSONA: stage,
        DLQ: deleting(settings, settings.dlq_retention_s),
        EVENTS: stage,  # ids and counts; the user's words only if the events include text
    }
    for table in TABLES:
        configs[changelog_topic(settings.app_id, table)] = compacted(settings)
    return configs


async def ensure_topics(bootstrap: str, settings: Settings) -> list[str]:
    """Create every missing topic with its configuration, before any consumer subscribes.

    Faust creates a topic only if it is missing, and a consumer's metadata request makes a
    broker with auto-creation (Tansu; Kafka's default) create it first, without our settings.
    An existing topic whose settings differ is reported, not changed: Tansu has no
    AlterConfigs, and on a real Kafka deploy/ applies them (docs/operations.md, "How long each
    topic keeps data").
    Returns the topics created.
    """
    wanted = topic_configs(settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **kafka_client_options(settings))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [name for name in wanted if name not in existing]
        if missing:
            replicas = settings.topic_replication_factor
            response = await admin.create_topics([NewTopic(name, settings.topic_partitions,
                                                           replicas, topic_configs=wanted[name])
                                                  for name in missing])  # fmt: skip
            for name, code, message in response.topic_errors:
                if code not in (0, TOPIC_ALREADY_EXISTS):  # another worker may have won
                    log.warning("could not create topic %s: error %s %s", name, code, message)
        present = [name for name in wanted if name in existing]
        if present:
            resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in present]
            for response in await admin.describe_configs(resources):
                for resource in response.resources:
                    name, entries = resource[3], resource[4]
                    found = {entry[0]: entry[1] for entry in entries}
                    drift = {k: v for k, v in wanted[name].items() if found.get(k) != v}
                    if drift:
                        log.warning("topic %s lacks its retention settings %s", name, drift)
        return missing
    finally:
        await admin.close()
