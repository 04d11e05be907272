"""Every environment's k8s values, both scales, against the agent-env chart shipped in the pinned inspect-k8s-sandbox:
its values.schema.json after merging the chart's default values (as Helm does), and what its templates read."""

import json
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

from rebench.environments import ENVIRONMENTS
from rebench_inspect.runtime.sandbox import (
    AGENT_WORKSPACE,
    K8S_NODE_SELECTOR_VARIABLE,
    K8S_RUNTIME_CLASS_VARIABLE,
    KEEP_ALIVE,
    SCORING_SERVICE,
    TEMP_DIRS,
    image_tag,
    k8s_values,
    k8s_values_file,
    sandbox_spec,
)
from rebench_inspect.spec.environment import CONTAINER_LIMITS, SCALES

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("k8s_sandbox", reason="the k8s extra is not installed: pip install -e '.[k8s]'")
CHART = Path(str(files("k8s_sandbox"))) / "resources" / "helm" / "agent-env"
CASES = [(name, scale) for name in sorted(ENVIRONMENTS) for scale in SCALES]


def helm_merge(defaults: dict, overrides: dict) -> dict:
    """Helm's coalescing of user values over chart defaults: maps merge key by key, anything else replaces."""
    merged = dict(defaults)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def chart_values(values: dict) -> dict:
    return helm_merge(yaml.safe_load((CHART / "values.yaml").read_text()), values)


def test_the_chart_rejects_what_it_should():
    """The check can fail: the old top-level isolation key is refused by the chart's schema."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    broken = {**k8s_values(ENVIRONMENTS["optimize_kernel"].at("full")), "networkIsolated": True}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(chart_values(broken), schema)


@pytest.mark.parametrize(("name", "scale"), CASES)
def test_values_validate_against_the_chart_schema(name, scale):
    schema = json.loads((CHART / "values.schema.json").read_text())
    path = Path(sandbox_spec(ENVIRONMENTS[name].at(scale), "k8s").config)  # type: ignore[arg-type]
    jsonschema.validate(chart_values(yaml.safe_load(path.read_text())), schema)


@pytest.mark.parametrize(("name", "scale"), CASES)
def test_templates_read_what_we_intend(name, scale, monkeypatch):
    monkeypatch.delenv(K8S_RUNTIME_CLASS_VARIABLE, raising=False)
    monkeypatch.delenv(K8S_NODE_SELECTOR_VARIABLE, raising=False)
    environment = ENVIRONMENTS[name]
    generated = k8s_values(environment.at(scale))["services"]
    assert set(generated) == ({"default", SCORING_SERVICE} if environment.isolated_scoring else {"default"})
    assert all(other == generated["default"] for other in generated.values())  # scoring apart: a pod like the agent's
    service = chart_values(k8s_values(environment.at(scale)))["services"]["default"]
    assert service["image"] == image_tag(name, scale)
    assert service["command"] == KEEP_ALIVE
    assert service["workingDir"] == AGENT_WORKSPACE
    assert service["networkIsolated"] is True
    gpus = environment.resources.gpus if scale == "full" else 0
    requests, limits = service["resources"]["requests"], service["resources"]["limits"]
    assert requests == limits  # guaranteed QoS: what the spec's hardware line asks for, no more
    assert int(limits.get("nvidia.com/gpu", 0)) == gpus
    if scale == "full":
        assert limits["cpu"] == str(environment.resources.cpus)
        assert limits["memory"] == f"{environment.resources.memory_gb}Gi"
    limits = CONTAINER_LIMITS[scale]
    mounts = {mount["name"]: mount["mountPath"] for mount in service["volumeMounts"]}
    sizes = {mounts[volume["name"]]: volume["emptyDir"] for volume in service["volumes"]}
    assert sizes == {
        "/dev/shm": {"medium": "Memory", "sizeLimit": f"{limits.shm_gb}Gi"},
        **{folder: {"medium": "Memory", "sizeLimit": f"{limits.temp_gb}Gi"} for folder in TEMP_DIRS},
    }
    escalation = service["securityContext"].get("allowPrivilegeEscalation", True)
    assert escalation is environment.agent_runs_setuid
    if gpus:
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in service["tolerations"]
        assert service["runtimeClassName"] == "nvidia"
        assert service["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    else:
        assert service["tolerations"] == [] and service["nodeSelector"] == {}
        assert service["runtimeClassName"] == "gvisor"  # the chart's default sandboxing runtime


def test_runtime_class_and_node_selector_are_set_per_run_without_editing_files(monkeypatch):
    monkeypatch.setenv(K8S_RUNTIME_CLASS_VARIABLE, "CLUSTER_DEFAULT")
    monkeypatch.setenv(K8S_NODE_SELECTOR_VARIABLE, '{"gpu.example.com/model": "h100"}')
    environment = ENVIRONMENTS["optimize_kernel"]
    path = k8s_values_file(environment.at("full"))
    service = yaml.safe_load(path.read_text())["services"]["default"]
    assert service["runtimeClassName"] == "CLUSTER_DEFAULT"
    assert service["nodeSelector"] == {"gpu.example.com/model": "h100"}
    monkeypatch.delenv(K8S_RUNTIME_CLASS_VARIABLE)
    assert k8s_values_file(environment.at("full")) != path  # another run's values never overwrite this one's
