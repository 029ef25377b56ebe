from tests.kafka.admin import create_topic
from tests.kafka.javakafka import run_tool


def _run(cls, *args):
    r = run_tool(cls, list(args), 120)
    return f"rc={r.returncode}\nOUT:{r.stdout[-1500:]}\nERR:{r.stderr[-800:]}"


def test_tools(bootstrap, members):
    topic = create_topic(bootstrap, 3)
    member = members("confluent-kafka", "zz-group", topic, "range")
    member.commit({0: 0})
    c = "kafka.admin.ConfigCommand"
    t = "org.apache.kafka.tools."
    b = ["--bootstrap-server", bootstrap]
    out = []
    for cls, args in [
        (c, [*b, "--describe", "--entity-type", "groups"]),
        (c, [*b, "--describe", "--entity-type", "topics"]),
        (
            c,
            [
                *b,
                "--alter",
                "--entity-type",
                "groups",
                "--entity-name",
                "zz-group",
                "--add-config",
                "consumer.session.timeout.ms=50000",
            ],
        ),
        (t + "AclCommand", [*b, "--list"]),
        (t + "LogDirsCommand", [*b, "--describe"]),
        (t + "FeatureCommand", [*b, "describe"]),
        (t + "GroupsCommand", [*b, "--list"]),
    ]:
        out.append(f"== {cls} {args[2:]}\n" + _run(cls, *args))
    member.close()
    with open(f"/tmp/tools3_{bootstrap.replace(':', '_')}.txt", "w") as f:
        f.write("\n".join(out))
