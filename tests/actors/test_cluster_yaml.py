"""cluster.yaml is a valid Ray cluster launcher config: Ray's shipped JSON schema and Ray's own
config preparation and validation both accept it, and it starts the coordinator on a shared
filesystem."""

from __future__ import annotations

import copy
import json
import os

import jsonschema
import pytest
import ray.autoscaler
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def config() -> dict:
    with open(os.path.join(ROOT, "cluster.yaml")) as f:
        return yaml.safe_load(f)


def test_matches_rays_schema(config):
    with open(os.path.join(os.path.dirname(ray.autoscaler.__file__), "ray-schema.json")) as f:
        schema = json.load(f)
    jsonschema.validate(config, schema)
    broken = {**config, "head_node_type": 7}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_passes_rays_config_validation(config):
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    assert prepared["head_node_type"] in prepared["available_node_types"]
    wrong = copy.deepcopy(prepared)
    wrong["head_node_type"] = "nope"
    with pytest.raises(ValueError):
        validate_config(wrong)


def test_installs_package_mounts_shared_logs_and_starts_coordinator(config):
    setup = " ".join(config["setup_commands"])
    assert "pip install" in setup and "groupcoord" in setup
    assert "mount -t nfs4" in setup  # the shared log filesystem
    serve = [c for c in config["head_start_ray_commands"] if "groupcoord serve" in c]
    assert serve and "--log-dir /mnt/groupcoord" in serve[0] and "--address auto" in serve[0]
    assert any("ray start --head" in c for c in config["head_start_ray_commands"])
    assert "ray start --address" in " ".join(config["worker_start_ray_commands"])
