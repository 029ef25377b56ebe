"""``groupcoord groups --validate-regex`` against Kafka's own ``kafka-consumer-groups
--validate-regex`` (RE2/J, in Kafka's jars): the same sentence for each pattern, valid or not,
so that what a consumer is told about its topic regex (INVALID_REGULAR_EXPRESSION's message,
``coordinator.topic_regex``) reads as Kafka's. Kafka's tool checks the pattern itself; it is
given an address nothing listens on."""

from __future__ import annotations

import json

import pytest

from groupcoord.actors.cli import main
from tests.kafka.javakafka import CONSUMER_GROUPS_MAIN, run_tool

PATTERNS = [
    "orders-.*",
    "",
    "a{,5}",
    "(?P<1a>x)",
    "a(b",
    "a)",
    "[a",
    "[z-a]",
    "a**",
    "x{1001}",
    "x{2,1}",
    "\\",
    "\\8",
    "\\pX",
    "(?P<n",
    "(?P<n>a",
    "(?<=x)y",
    "(?i",
    "*a",
    "a|*",
    "[[:foo:]]",
    # A name given to two groups: RE2 takes it, RE2/J refuses it. Escaped, quoted or in a
    # character class, "(?P<a>" opens no group.
    "(?P<a>x)(?P<a>y)",
    "(?P<a>x)|(?<a>y)",
    "(?P<a>(?P<a>y))",
    "(?P<a>x)(?P<b>y)",
    "[(?P<a>]x(?P<a>y)",
    "[](?P<a>]x(?P<a>y)",
    "[[:alpha:](?P<a>]x(?P<a>y)",
    "\\Q(?P<a>\\E(?P<a>y)",
    "\\(?P<a>x)(?P<a>y)",
]


def test_each_pattern_gets_kafkas_sentence(capsys):
    for pattern in PATTERNS:
        kafka = run_tool(
            CONSUMER_GROUPS_MAIN,
            ["--bootstrap-server", "127.0.0.1:1", "--validate-regex", pattern],
            90,
        )
        assert kafka.returncode == 0, kafka.stderr
        code = main(["groups", "--validate-regex", pattern])
        out, err = capsys.readouterr()
        assert out == kafka.stdout, pattern
        valid = kafka.stdout.endswith("is valid.\n")
        assert code == (0 if valid else 1) and err == "", err


@pytest.mark.parametrize("pattern, reason", [("a(b", "missing closing )"), ("x", None)])
def test_json_and_the_coordinators_own_stderr(pattern, reason, capfd):
    # Before: RE2 logged every pattern it refused on the process's stderr ("re2.cc:242]
    # Error parsing ..."): a line in a partition's log for each consumer's bad regex.
    assert main(["groups", "--validate-regex", pattern, "--json"]) == (0 if reason is None else 1)
    out, err = capfd.readouterr()
    assert json.loads(out) == {"regex": pattern, "valid": reason is None, "reason": reason}
    assert err == ""
