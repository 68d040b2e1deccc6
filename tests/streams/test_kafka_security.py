"""One set of MEMORYOS_KAFKA_* settings, mapped for aiokafka and for Faust alike.

SASL is tested here as a mapping: the Tansu 0.6.0 broker we embed offers only SCRAM (no
PLAIN), and its users can be created only over an already authenticated connection, so a broker
started with ``--authentication`` and in-memory storage has no user anyone can log in as.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from adapters.settings import load_settings
from schemas.errors import ConfigError
from streams.kafka_security import faust_credentials, kafka_client_options
from tests.support.tls import self_signed

BROKER = {"broker_url": "kafka://kafka.example:9093"}


def settings(**values: Any) -> Any:
    return load_settings(**(BROKER | values))


def test_plaintext_by_default_for_both_kinds_of_client() -> None:
    plain = load_settings()
    assert kafka_client_options(plain) == {"security_protocol": "PLAINTEXT"}
    assert faust_credentials(plain) is None


def test_tls_verifies_the_broker_against_the_ca_file(tmp_path: Path) -> None:
    ca = self_signed(tmp_path, "ca")
    options = kafka_client_options(
        settings(kafka_security_protocol="SSL", kafka_ssl_cafile=ca.cert)
    )
    context = options["ssl_context"]
    assert options["security_protocol"] == "SSL"
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "ca"),),)]


def test_hostname_check_can_be_turned_off_but_verification_cannot(tmp_path: Path) -> None:
    ca = self_signed(tmp_path, "ca")
    loose = settings(
        kafka_security_protocol="SSL", kafka_ssl_cafile=ca.cert, kafka_ssl_check_hostname=False
    )
    context = kafka_client_options(loose)["ssl_context"]
    assert not context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_sasl_reaches_aiokafka_and_faust_the_same_way(protocol: str, mechanism: str) -> None:
    sasl = settings(
        kafka_security_protocol=protocol,
        kafka_sasl_mechanism=mechanism,
        kafka_sasl_username="memoryos",
        kafka_sasl_password="s3cret",
    )
    ours = kafka_client_options(sasl)
    assert ours["security_protocol"] == protocol
    assert (ours["sasl_mechanism"], ours["sasl_plain_username"], ours["sasl_plain_password"]) == (
        mechanism,
        "memoryos",
        "s3cret",
    )
    assert ("ssl_context" in ours) == (protocol == "SASL_SSL")
    # What Faust hands its own aiokafka clients from our credentials: the same options.
    theirs = dict(credentials_to_aiokafka_auth(faust_credentials(sasl)))
    assert {k: v for k, v in theirs.items() if k != "ssl_context"} == {
        k: v for k, v in ours.items() if k != "ssl_context"
    }
    assert (theirs["ssl_context"] is None) == (protocol == "SASL_PLAINTEXT")


def test_tls_reaches_faust(tmp_path: Path) -> None:
    ca = self_signed(tmp_path, "ca")
    tls = settings(kafka_security_protocol="SSL", kafka_ssl_cafile=ca.cert)
    theirs = dict(credentials_to_aiokafka_auth(faust_credentials(tls)))
    assert theirs["security_protocol"] == "SSL"
    assert theirs["ssl_context"].verify_mode == ssl.CERT_REQUIRED


def test_client_certificate_is_loaded(tmp_path: Path) -> None:
    ca, client = self_signed(tmp_path, "ca"), self_signed(tmp_path, "client")
    mutual = settings(
        kafka_security_protocol="SSL",
        kafka_ssl_cafile=ca.cert,
        kafka_ssl_certfile=client.cert,
        kafka_ssl_keyfile=ca.key,  # not the certificate's key
    )
    with pytest.raises(ConfigError, match="MEMORYOS_KAFKA_SSL_CERTFILE/KEYFILE"):
        kafka_client_options(mutual)
    fixed = mutual.model_copy(update={"kafka_ssl_keyfile": client.key})
    assert kafka_client_options(fixed)["ssl_context"] is not None


def test_an_unreadable_ca_file_names_the_variable(tmp_path: Path) -> None:
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ConfigError, match="MEMORYOS_KAFKA_SSL_CAFILE"):
        kafka_client_options(settings(kafka_security_protocol="SSL", kafka_ssl_cafile=junk))


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"kafka_security_protocol": "SASL_SSL"}, "MEMORYOS_KAFKA_SASL_PASSWORD"),
        (
            {"kafka_security_protocol": "SASL_SSL", "kafka_sasl_username": "u"},
            "MEMORYOS_KAFKA_SASL_PASSWORD",
        ),
        ({"kafka_sasl_username": "u", "kafka_sasl_password": "p"}, "SASL_SSL or SASL_PLAINTEXT"),
        ({"kafka_ssl_cafile": "__file__"}, "SSL or SASL_SSL"),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_certfile": "__file__"},
            "MEMORYOS_KAFKA_SSL_KEYFILE",
        ),
        ({"kafka_ssl_cafile": "/no/such/ca.pem"}, "MEMORYOS_KAFKA_SSL_CAFILE"),
        ({"kafka_security_protocol": "TLS"}, "MEMORYOS_KAFKA_SECURITY_PROTOCOL"),
        ({"kafka_sasl_mechanism": "GSSAPI"}, "MEMORYOS_KAFKA_SASL_MECHANISM"),
    ],
)
def test_a_half_configured_security_setting_is_refused(values: dict[str, str], named: str) -> None:
    values = {k: __file__ if v == "__file__" else v for k, v in values.items()}
    with pytest.raises(ConfigError, match=named):
        settings(**values)


def test_security_needs_a_broker_url_not_the_embedded_broker() -> None:
    with pytest.raises(ConfigError, match="MEMORYOS_BROKER_URL"):
        load_settings(kafka_security_protocol="SSL")


def test_the_sasl_password_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYOS_KAFKA_SASL_PASSWORD", "hunter2-secret")
    monkeypatch.setenv("MEMORYOS_KAFKA_SASL_USERNAME", "memoryos")
    with pytest.raises(ConfigError) as refused:
        load_settings()  # a login without a SASL protocol
    assert "hunter2-secret" not in str(refused.value)
    ok = settings(kafka_security_protocol="SASL_SSL")
    assert "hunter2-secret" not in repr(ok)
    assert kafka_client_options(ok)["sasl_plain_password"] == "hunter2-secret"
