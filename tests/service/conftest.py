"""Fixtures of the service's tests: ``service`` is ann's ten turns through the stages with fakes."""

from tests.support.pipelines import service  # noqa: F401
