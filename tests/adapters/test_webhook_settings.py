"""MEMORYOS_WEBHOOKS is refused at start with a message that says which entry is wrong and
why: a URL that is not http(s) (file:, javascript:, a bare path), credentials in the URL, a
secret not in Standard Webhooks' form, an unknown event type, too many webhooks, not JSON."""

from __future__ import annotations

import orjson
import pytest

from adapters.settings import load_settings
from schemas.errors import ConfigError
from schemas.webhooks import MAX_WEBHOOKS

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def hooks(*entries: dict[str, object]) -> str:
    return orjson.dumps(list(entries)).decode()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (hooks({"url": "file:///etc/passwd", "secret": SECRET}), "must be http(s)"),
        (hooks({"url": "javascript:alert(1)", "secret": SECRET}), "must be http(s)"),
        (hooks({"url": "ftp://example.com/x", "secret": SECRET}), "must be http(s)"),
        (hooks({"url": "/relative/path", "secret": SECRET}), "must be http(s)"),
        (hooks({"url": "http://user:pw@example.com/", "secret": SECRET}), "credentials"),
        (hooks({"url": "http://127.0.0.1:99999/x", "secret": SECRET}), "port"),
        (hooks({"url": "http://example.com:80a/", "secret": SECRET}), "port"),
        (hooks({"url": "http://example.com:0/", "secret": SECRET}), "port"),
        (hooks({"url": "http://exa mple.com/", "secret": SECRET}), "spaces or control"),
        (hooks({"url": "http://a/\r\nX-Evil: 1", "secret": SECRET}), "spaces or control"),
        (hooks({"url": "http://bücher.de/", "secret": SECRET}), "ASCII"),
        (hooks({"url": "https://example.com/", "secret": "hunter2"}), "whsec_"),
        (hooks({"url": "https://example.com/", "secret": "whsec_!!!"}), "not base64"),
        (hooks({"url": "https://example.com/", "secret": "whsec_AAAA"}), "24 to 64 bytes"),
        (
            hooks({"url": "https://example.com/", "secret": SECRET, "types": ["memory.x"]}),
            "unknown event types",
        ),
        (hooks({"url": "https://example.com/", "secret": SECRET, "extra": 1}), "extra"),
        ("not json", "Invalid JSON"),
        ('{"url": "https://example.com/"}', "list"),
        (hooks(*[{"url": "https://e.com/", "secret": SECRET}] * (MAX_WEBHOOKS + 1)), "at most"),
    ],
)
def test_a_bad_webhook_setting_is_refused_with_its_reason(value: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(webhooks=value)
    assert says in str(refused.value)
    assert "MEMORYOS_WEBHOOKS" in str(refused.value)
    assert SECRET not in str(refused.value), "the secret is never printed"


def test_good_webhooks_are_read_with_their_types() -> None:
    value = hooks(
        {"url": "https://crm.example.com/hooks/memory", "secret": SECRET},
        {"url": "http://127.0.0.1:9000/x", "secret": SECRET, "types": ["memory.user.forgotten"]},
    )
    settings = load_settings(webhooks=value)
    first, second = settings.webhook_list
    assert first.wants("memory.page.stored")
    assert not second.wants("memory.page.stored")
    assert second.wants("memory.user.forgotten")
    assert first.name == "crm.example.com"
    assert second.name == "127.0.0.1:9000"
    assert SECRET not in repr(settings)
