"""Static checks of the deployment files against the code they deploy.

No Docker engine or cluster runs here, so every file is parsed and held against its source
of truth: `Settings` for environment names and values, `Metrics` for every metric a dashboard
or alert queries, the CLI's HTTP endpoints for probes and scrape targets.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase
from pydantic import AliasChoices

from adapters.metrics import Metrics
from adapters.settings import ENV_PREFIX, Settings
from tests.support.deploy import DEPLOY, load_dashboard, load_yaml, panels
from tests.support.paths import ROOT

OUR_SERVICES = {"worker": "worker", "service": "serve"}  # compose service -> CLI command
COMPOSE_SERVICES = {"kafka", "qdrant", *OUR_SERVICES, "prometheus", "tempo", "grafana"}
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance"}
METRIC = re.compile(r"\bmemoryos_[a-z_]+")


# --- the code's side: settings and metrics ---


def settings_env_names() -> set[str]:
    names = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    for field in Settings.model_fields.values():
        if isinstance(field.validation_alias, AliasChoices):
            names.update(c for c in field.validation_alias.choices if isinstance(c, str))
    return names


def exported_series() -> dict[str, set[str]]:
    """Every series name `Metrics` exports (as Prometheus stores it) and its label names."""
    metrics = Metrics(CollectorRegistry())
    for collector in vars(metrics).values():
        labelnames = getattr(collector, "_labelnames", ())
        if isinstance(collector, MetricWrapperBase) and labelnames:
            collector.labels(*("x" for _ in labelnames))  # a child, so samples get collected
    series: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return series


SERIES = exported_series()


def metric_problems(expr: str, legend: str = "") -> list[str]:
    """What in one PromQL expression does not exist in the code: names, then labels."""
    names = METRIC.findall(expr)
    problems = [f"{name}: not exported by adapters.metrics" for name in names if name not in SERIES]
    if problems:
        return problems
    labels = set(TARGET_LABELS).union(*(SERIES[name] for name in names))
    for name, matchers in re.findall(r"(memoryos_[a-z_]+)\{([^}]*)\}", expr):
        for label in re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers):
            if label not in SERIES[name] | TARGET_LABELS:
                problems.append(f"{name} has no label {label!r}")
    grouped = re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr)
    grouped += re.findall(r"label_values\(\s*memoryos_[a-z_]+\s*,\s*(\w+)\s*\)", expr)
    used = {g.strip() for group in grouped for g in group.split(",") if g.strip()}
    used |= set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
    problems += [f"no metric in {expr!r} has label {label!r}" for label in used - labels]
    return problems


def test_metric_check_rejects_what_the_code_does_not_export() -> None:
    assert metric_problems("rate(memoryos_events_total[5m])") == []
    assert metric_problems('memoryos_stage_duration_seconds_bucket{stage="chain"}') == []
    assert metric_problems("rate(memoryos_bogus_total[5m])")
    assert metric_problems("rate(memoryos_events[5m])")  # a counter's series ends in _total
    assert metric_problems("memoryos_consumer_lag_total")  # a gauge's does not
    assert metric_problems("memoryos_stage_duration_seconds")  # a histogram has no bare series
    assert metric_problems('memoryos_events_total{stages="x"}')
    assert metric_problems("sum by (route) (memoryos_events_total)")
    assert metric_problems("memoryos_events_total", legend="{{route}}")


# --- docker-compose.yml ---


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(ROOT / "docker-compose.yml")
    return data


def interpolate(value: object) -> str:
    """Compose's `${VAR:-default}` with the variable unset: the default."""
    return re.sub(r"\$\{\w+(?::?-([^}]*))?\}", lambda m: m.group(1) or "", str(value))


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: interpolate(value) for key, value in env.items()}


def container_ports(service: dict[str, Any]) -> set[int]:
    return {int(str(p).split(":")[-1].split("/")[0]) for p in service.get("ports", [])}


def test_compose_has_the_stack(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == COMPOSE_SERVICES
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert services["qdrant"]["image"].startswith("qdrant/qdrant:")
    assert services["prometheus"]["image"].startswith("prom/prometheus:")
    assert services["grafana"]["image"].startswith("grafana/grafana:")
    for name, command in OUR_SERVICES.items():
        assert services[name]["command"] == [command]
        for dependency in ("kafka", "qdrant"):
            assert services[name]["depends_on"][dependency]["condition"] == "service_healthy"
    for name, service in services.items():
        assert "healthcheck" in service, f"{name} has no healthcheck"
    for volume in ("kafka-data", "qdrant-data", "grafana-data"):
        assert volume in compose["volumes"]


def test_worker_scales(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    assert "container_name" not in worker
    assert "ports" not in worker, "a host port would collide under --scale worker=N"


def test_compose_environment_is_settings(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    known = settings_env_names()
    for name in OUR_SERVICES:
        env = environment(compose["services"][name])
        assert set(env) <= known, f"{name}: not in Settings: {sorted(set(env) - known)}"
        settings = settings_from(env, monkeypatch)
        assert settings.broker_url == "kafka://kafka:9092"
        assert (settings.store, settings.qdrant_url) == ("qdrant", "http://qdrant:6333")
        assert settings.host == "0.0.0.0"
        assert settings.llm == "offline"
        assert settings.topic_partitions > 1
        assert settings.consumer_rebalance_timeout_s == settings.consumer_session_timeout_s == 30


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings a container with exactly this environment would build (values checked)."""
    for name in [n for n in os.environ if n in settings_env_names()]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Volume source -> target ("src:target[:mode]")."""
    return dict(tuple(volume.split(":")[:2]) for volume in service.get("volumes", []))


def port_of(service: dict[str, Any]) -> int:
    return int(environment(service)["MEMORYOS_PORT"])


def test_compose_ports_agree(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert port_of(services["service"]) in container_ports(services["service"])
    for name in OUR_SERVICES:
        probe = " ".join(services[name]["healthcheck"]["test"])
        assert f":{port_of(services[name])}/healthz" in probe


# --- Dockerfile ---


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = (ROOT / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [
        (parts[0].upper(), parts[1] if len(parts) > 1 else "")
        for parts in (line.strip().split(None, 1) for line in joined.splitlines())
        if parts
    ]


def test_dockerfile() -> None:
    steps = dockerfile()
    kinds = [kind for kind, _ in steps]
    assert kinds.count("FROM") >= 2, "multi-stage"
    assert any(kind == "ARG" and "python:3.11-slim" in args for kind, args in steps)
    users = [args for kind, args in steps if kind == "USER"]
    assert users, "no USER"
    assert users[-1].split(":")[0] not in ("root", "0")
    assert any(kind == "HEALTHCHECK" and "/healthz" in args for kind, args in steps)
    assert ("EXPOSE", "8080") in steps
    env = " ".join(args for kind, args in steps if kind == "ENV")
    assert "MEMORYOS_PORT=8080" in env
    assert "MEMORYOS_HOST=0.0.0.0" in env
    assert ("ENTRYPOINT", '["memoryos"]') in steps
    assert ("CMD", '["serve"]') in steps
    runs = [args for kind, args in steps if kind == "RUN"]
    torch = next(i for i, r in enumerate(runs) if "torch==2.13.0" in r)
    assert "--index-url https://download.pytorch.org/whl/cpu" in runs[torch]
    project = next(i for i, r in enumerate(runs) if "pip install ." in r)
    assert torch < project, "torch from the CPU index must come before the project"
    export = next(
        i
        for i, r in enumerate(runs)
        if "MEMORYOS_MODEL_CACHE_DIR=/opt/models python -m adapters.embedders.minilm_models" in r
    )
    assert project < export, "the ONNX graph is exported from the installed project"
    assert "MEMORYOS_MODEL_CACHE_DIR=/opt/models" in env
    assert any(kind == "COPY" and args.endswith("/opt/models /opt/models") for kind, args in steps)
    names = {name for name in settings_env_names() if name.startswith(ENV_PREFIX)}
    for word in shlex.split(env):
        if word.startswith(ENV_PREFIX):
            assert word.split("=", 1)[0] in names


def test_image_gets_every_package() -> None:
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    needed = {*(p.split(".")[0] for p in packages["packages"]), "pyproject.toml", "README.md"}
    copied = {src for kind, args in dockerfile() if kind == "COPY" for src in args.split()[:-1]}
    assert needed <= copied
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    excluded = {name for name in needed for pattern in patterns if fnmatch(name, pattern)}
    assert not excluded, f".dockerignore drops {sorted(excluded)}"


# --- Prometheus ---


@pytest.fixture(scope="module")
def prometheus() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
    return data


def test_prometheus_scrapes_every_replica(
    prometheus: dict[str, Any], compose: dict[str, Any]
) -> None:
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    assert set(OUR_SERVICES) <= set(jobs)
    assert set(jobs) - {"prometheus"} <= set(compose["services"])
    for name in OUR_SERVICES:
        job = jobs[name]
        assert job.get("metrics_path", "/metrics") == "/metrics"
        [discovery] = job["dns_sd_configs"]
        assert discovery["names"] == [name]
        assert discovery["type"] == "A"
        assert discovery["port"] == port_of(compose["services"][name])


def test_prometheus_rule_files_are_mounted(
    prometheus: dict[str, Any], compose: dict[str, Any]
) -> None:
    assert mounts(compose["services"]["prometheus"])["./deploy/prometheus"] == "/etc/prometheus"
    for rule_file in prometheus["rule_files"]:
        assert rule_file.startswith("/etc/prometheus/")
        assert (DEPLOY / "prometheus" / Path(rule_file).name).is_file()


def test_alert_rules_use_exported_metrics() -> None:
    groups = load_yaml(DEPLOY / "prometheus" / "alerts.yml")["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    names = {rule["alert"] for rule in rules}
    assert {
        "MemoryOSConsumerLagGrowing",
        "MemoryOSDeadLetters",
        "MemoryOSLLMFailureRate",
        "MemoryOSRetrieveLatencyHigh",
    } <= names
    problems = [f"{r['alert']}: {p}" for r in rules for p in metric_problems(r["expr"])]
    assert not problems, "\n".join(problems)
    retrieve = next(r for r in rules if r["alert"] == "MemoryOSRetrieveLatencyHigh")
    assert 'route="retrieve"' in retrieve["expr"]
    assert "0.03" in retrieve["expr"]


# --- Grafana ---


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return load_dashboard()


def test_grafana_provisioning(compose: dict[str, Any]) -> None:
    [source] = load_yaml(DEPLOY / "grafana/provisioning/datasources/prometheus.yml")["datasources"]
    assert (source["uid"], source["type"]) == ("prometheus", "prometheus")
    assert source["url"] == "http://prometheus:9090"
    assert 9090 in container_ports(compose["services"]["prometheus"])
    [provider] = load_yaml(DEPLOY / "grafana/provisioning/dashboards/memoryos.yml")["providers"]
    assert provider["type"] == "file"
    grafana = mounts(compose["services"]["grafana"])
    assert grafana["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    assert grafana["./deploy/grafana/dashboards"] == provider["options"]["path"]


def test_traces_go_to_tempo_and_the_dashboard_links_to_them(
    compose: dict[str, Any], dashboard: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    tempo = compose["services"]["tempo"]
    assert mounts(tempo)["./deploy/tempo"] == "/etc/tempo"
    config = load_yaml(DEPLOY / "tempo/tempo.yml")
    otlp = config["distributor"]["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert otlp.endswith(":4318")
    assert config["server"]["http_listen_port"] == 3200
    for name in OUR_SERVICES:
        settings = settings_from(environment(compose["services"][name]), monkeypatch)
        assert settings.otlp_traces_endpoint == "http://tempo:4318/v1/traces"
    [source] = load_yaml(DEPLOY / "grafana/provisioning/datasources/tempo.yml")["datasources"]
    assert (source["uid"], source["type"], source["url"]) == ("tempo", "tempo", "http://tempo:3200")
    [link] = [link for link in dashboard["links"] if "Tempo" in link["title"]]
    assert "tempo" in link["url"]


def test_dashboard_queries_use_exported_metrics(dashboard: dict[str, Any]) -> None:
    problems = []
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            for problem in metric_problems(target["expr"], target.get("legendFormat", "")):
                problems.append(f"{panel['title']}: {problem}")
    for variable in dashboard["templating"]["list"]:
        query = variable["query"]
        query = query["query"] if isinstance(query, dict) else query
        problems += [f"${variable['name']}: {p}" for p in metric_problems(query)]
    assert not problems, "\n".join(problems)


def test_dashboard_covers_the_pipeline(dashboard: dict[str, Any]) -> None:
    ids = [panel["id"] for panel in panels(dashboard)]
    assert len(ids) == len(set(ids))
    exprs = " ".join(t["expr"] for p in panels(dashboard) for t in p.get("targets", []))
    for panel in panels(dashboard):
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "prometheus", panel["title"]
    for series in (
        "memoryos_events_total",
        "memoryos_stage_duration_seconds_bucket",
        "memoryos_request_duration_seconds_bucket",
        "memoryos_llm_requests_total",
        "memoryos_llm_tokens_total",
        "memoryos_llm_request_duration_seconds_bucket",
        "memoryos_embedding_batch_size_bucket",
        "memoryos_embedding_duration_seconds_bucket",
        "memoryos_store_operation_duration_seconds_bucket",
        "memoryos_consumer_lag",
        "memoryos_dead_letters_total",
        "memoryos_memory_transitions_total",
        "memoryos_in_flight",
    ):
        assert re.search(rf"\b{series}\b", exprs), f"no panel shows {series}"
    for quantile in ("0.5", "0.95", "0.99"):
        assert f"histogram_quantile({quantile}, sum by (stage, le)" in exprs


# --- Kubernetes ---


@pytest.fixture(scope="module")
def k8s() -> dict[tuple[str, str], dict[str, Any]]:
    kustomization = load_yaml(DEPLOY / "k8s/kustomization.yaml")
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk, "kustomization.yaml must list every manifest"
    objects = {}
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
                if doc["kind"] != "Namespace":
                    assert doc["metadata"]["namespace"] == kustomization["namespace"]
    return objects


def test_k8s_environment_is_settings(
    k8s: dict[tuple[str, str], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = k8s[("ConfigMap", "memoryos-config")]["data"]
    secret = k8s[("Secret", "memoryos-secrets")]["stringData"]
    assert {"OPENAI_API_KEY", "MEMORYOS_API_KEYS"} <= set(secret)
    env = {**config, **secret}
    assert set(env) <= settings_env_names(), sorted(set(env) - settings_env_names())
    settings = settings_from({k: str(v) for k, v in env.items()}, monkeypatch)
    assert settings.store == "qdrant"
    assert settings.broker_url
    assert settings.host == "0.0.0.0"


@pytest.mark.parametrize(
    ("name", "command", "replicas"),
    [("memoryos-worker", "worker", 3), ("memoryos-service", "serve", 2)],
)
def test_k8s_deployment(
    k8s: dict[tuple[str, str], dict[str, Any]], name: str, command: str, replicas: int
) -> None:
    deployment = k8s[("Deployment", name)]
    port = int(k8s[("ConfigMap", "memoryos-config")]["data"]["MEMORYOS_PORT"])
    template = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == replicas
    assert (
        deployment["spec"]["selector"]["matchLabels"].items()
        <= template["metadata"]["labels"].items()
    )
    [container] = template["spec"]["containers"]
    assert container["args"] == [command]
    assert "command" not in container
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port in ports.values()
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert ports.get(get["port"], get["port"]) == port
    assert {"requests", "limits"} <= set(container["resources"])
    sources = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
    assert sources == {"memoryos-config", "memoryos-secrets"}
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == port
    assert annotations["prometheus.io/path"] == "/metrics"
    assert template["spec"]["securityContext"]["runAsNonRoot"] is True


def test_k8s_service_hpa_and_pdb(k8s: dict[tuple[str, str], dict[str, Any]]) -> None:
    def labels(name: str) -> dict[str, str]:
        return dict(k8s[("Deployment", name)]["spec"]["template"]["metadata"]["labels"])

    def selects(selector: dict[str, str], name: str) -> bool:
        return selector.items() <= labels(name).items()

    [service] = [doc for (kind, _), doc in k8s.items() if kind == "Service"]
    assert selects(service["spec"]["selector"], "memoryos-service")
    assert not selects(service["spec"]["selector"], "memoryos-worker")
    [port] = service["spec"]["ports"]
    assert port["port"] == 80
    container = k8s[("Deployment", "memoryos-service")]["spec"]["template"]["spec"]
    ports = {p["name"]: p["containerPort"] for p in container["containers"][0]["ports"]}
    assert ports.get(port["targetPort"], port["targetPort"]) == 8080

    [hpa] = [doc for (kind, _), doc in k8s.items() if kind == "HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "memoryos-service")
    assert ("Deployment", target["name"]) in k8s
    [metric] = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"

    [pdb] = [doc for (kind, _), doc in k8s.items() if kind == "PodDisruptionBudget"]
    assert selects(pdb["spec"]["selector"]["matchLabels"], "memoryos-worker")
    assert not selects(pdb["spec"]["selector"]["matchLabels"], "memoryos-service")


# --- the HTTP app the probes, scrapes and route labels point at ---


def route_values(expr: str) -> set[str]:
    values = re.findall(r'\broute\s*=~?\s*"([^"]*)"', expr)
    return {value for alternatives in values for value in alternatives.split("|")}


def test_probed_paths_and_route_labels_exist(dashboard: dict[str, Any]) -> None:
    from service.http import create_http_app

    def app(api: bool) -> Any:
        # Route registration touches neither the service nor the health checks.
        none: Any = None
        return create_http_app(none, Settings(), Metrics(CollectorRegistry()), none, none, api)

    for api in (True, False):  # the service replica and the worker
        paths = {getattr(route, "path", None) for route in app(api).routes}
        assert {"/healthz", "/readyz", "/metrics"} <= paths
    names = {getattr(route, "name", None) for route in app(True).routes}
    alerts = load_yaml(DEPLOY / "prometheus" / "alerts.yml")["groups"]
    exprs = [rule["expr"] for group in alerts for rule in group["rules"]]
    exprs += [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]
    used = set().union(*(route_values(expr) for expr in exprs))
    assert used, "the dashboard and alerts should single out retrieve and respond"
    assert used <= names, f"no such route: {sorted(used - names)}"


def _published_host(entry: str) -> str:
    """The host address a compose ``ports`` entry publishes on, its default taken."""
    parts = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(entry)).split(":")
    return parts[0] if len(parts) == 3 else "0.0.0.0"


def test_compose_publishes_nothing_on_every_interface_and_needs_a_key_and_a_password(
    compose: dict[str, Any],
) -> None:
    for name, service in compose["services"].items():
        for entry in service.get("ports", []):
            assert _published_host(entry) == "127.0.0.1", f"{name} publishes {entry}"
    text = (ROOT / "docker-compose.yml").read_text()
    assert "MEMORYOS_API_KEYS: ${MEMORYOS_API_KEYS:?" in text  # required, no empty default
    grafana = compose["services"]["grafana"]["environment"]
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")


def test_k8s_exposes_nothing_outside_the_cluster_and_ships_no_usable_key(
    k8s: dict[tuple[str, str], Any],
) -> None:
    for (kind, name), resource in k8s.items():
        if kind == "Service":
            assert resource["spec"].get("type", "ClusterIP") == "ClusterIP", name
        if kind == "Deployment":
            pod = resource["spec"]["template"]["spec"]
            assert not pod.get("hostNetwork"), name
            for container in pod["containers"]:
                assert all("hostPort" not in port for port in container.get("ports", [])), name
    # an unedited apply starts no API at all: the service refuses 0.0.0.0 without a key
    assert k8s[("Secret", "memoryos-secrets")]["stringData"]["MEMORYOS_API_KEYS"] == ""
    assert k8s[("ConfigMap", "memoryos-config")]["data"]["MEMORYOS_HOST"] == "0.0.0.0"
