"""Kafka TLS and SASL: one set of settings (``MEMORYOS_KAFKA_*``) for every client we run.

The aiokafka clients (the service replica's producer, `memoryos ingest`, `memoryos dlq`, the
consumer-lag probe, `memoryos doctor`) take ``kafka_client_options(settings)`` as keyword
arguments; the Faust app takes ``faust_credentials(settings)`` as ``broker_credentials``. Both
read the same settings, so no client is left speaking plaintext to a cluster that requires
SASL_SSL, and a client added later has one call to make.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

from adapters.settings import Settings
from schemas.errors import ConfigError

if TYPE_CHECKING:
    from faust.types.auth import CredentialsT


def kafka_ssl_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context of every client, or None when the protocol has no TLS."""
    if "SSL" not in settings.kafka_security_protocol:
        return None
    cafile = settings.kafka_ssl_cafile
    try:
        # No CA file: the system's CAs, which verify the publicly signed certificates of
        # managed Kafka services.
        context = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=str(cafile) if cafile else None
        )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"MEMORYOS_KAFKA_SSL_CAFILE: cannot load the CA file: {exc}") from None
    if settings.kafka_ssl_certfile and settings.kafka_ssl_keyfile:
        try:
            context.load_cert_chain(
                settings.kafka_ssl_certfile,
                settings.kafka_ssl_keyfile,
                settings.kafka_ssl_key_secret,
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"MEMORYOS_KAFKA_SSL_CERTFILE/KEYFILE: cannot load the client certificate: {exc}"
            ) from None
    # Verification stays on either way; only the name check can be turned off (a broker
    # reached through an address its certificate does not name).
    context.check_hostname = settings.kafka_ssl_check_hostname
    return context


def kafka_client_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for an aiokafka producer, consumer or admin client."""
    options: dict[str, Any] = {"security_protocol": settings.kafka_security_protocol}
    context = kafka_ssl_context(settings)
    if context is not None:
        options["ssl_context"] = context
    if settings.kafka_security_protocol.startswith("SASL"):
        # aiokafka names the fields "plain" but uses them for SCRAM as well.
        options.update(
            sasl_mechanism=settings.kafka_sasl_mechanism,
            sasl_plain_username=settings.kafka_sasl_username,
            sasl_plain_password=settings.kafka_sasl_secret,
        )
    return options


def faust_credentials(settings: Settings) -> CredentialsT | None:
    """The same settings as Faust's ``broker_credentials`` (None: plaintext)."""
    # Imported here: the CLI commands' producers and consumers need no Faust import.
    import faust

    protocol = settings.kafka_security_protocol
    context = kafka_ssl_context(settings)
    if protocol == "SSL":
        assert context is not None
        return faust.SSLCredentials(context)
    if protocol.startswith("SASL"):
        # Faust picks SASL_SSL when given a context and SASL_PLAINTEXT without one.
        return faust.SASLCredentials(
            username=settings.kafka_sasl_username,
            password=settings.kafka_sasl_secret,
            ssl_context=context,
            mechanism=settings.kafka_sasl_mechanism,
        )
    return None
