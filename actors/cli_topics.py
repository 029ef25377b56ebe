"""``groupcoord topics``: the topic catalog, listed, changed one topic at a time, or mirrored
from an upstream Kafka cluster (topic_mirror.py). Errors, the catalog's refusals included, exit
2 with one line on stderr (cli.py's convention for ``topics``)."""

from __future__ import annotations

import json
import sys
import time

import msgspec
from ray.exceptions import RayError, RayTaskError

from . import topic_mirror
from .bootstrap import ask
from .catalog_mirror import check_every_s
from .cli_common import EXIT_OK, UsageError, connect_and_say
from .cli_serve import iso_utc
from .end_offsets import check_servers
from .output import Output, first_line


def cmd_topics(args, out: Output) -> int:
    if args.action == "mirror":
        servers = _mirror_servers(args)  # usage errors before connecting
        return _mirror(args, servers, connect_and_say(args.namespace, args.address).router, out)
    if args.action != "list":  # usage errors before connecting
        if args.topic is None:
            raise UsageError(f"groupcoord: topics {args.action} needs a topic name")
        if args.action in ("create", "alter") and args.partitions is None:
            raise UsageError(f"groupcoord: topics {args.action} needs --partitions N")
    router = connect_and_say(args.namespace, args.address).router
    if args.action != "list":
        change = {
            "create": lambda: router.create_topic.remote(args.topic, args.partitions),
            "alter": lambda: router.alter_topic.remote(args.topic, args.partitions),
            "delete": lambda: router.delete_topic.remote(args.topic),
        }[args.action]
        try:
            ask(change(), "the router")
        except RayTaskError as exc:  # the router refused it: say why in one line
            raise ValueError(f"topics {args.action} {args.topic}: {exc.cause}") from None
    topics = ask(router.topics.remote(), "the router")
    rows = [{"topic": t, "partitions": n} for t, n in sorted(topics.items())]
    out.show("topics", "topics", rows, ("topic", "partitions"))
    out.finish()
    return 0


def _mirror_servers(args) -> str:
    """The upstream cluster's "host:port[,...]"; UsageError for a bad mirror command line."""
    kind, _, servers = (args.source or "").partition(":")
    if kind != "kafka":
        raise UsageError(
            "groupcoord topics mirror: --from kafka:HOST:PORT[,HOST:PORT...] is required"
        )
    if args.topic is not None:
        raise UsageError("groupcoord topics mirror takes no topic name (see --topic-pattern)")
    try:
        if args.every_s is not None:
            check_every_s(args.every_s, "--every-s")
        topic_mirror.topic_matcher(args.topic_pattern)
        return check_servers(servers)
    except ValueError as exc:
        raise UsageError(f"groupcoord topics mirror: {exc}") from None


def _mirror(args, servers: str, router, out: Output) -> int:
    """``topics mirror`` (topic_mirror.py): one round, or one every ``--every-s`` until
    interrupted, each showing what it changed (the first round: every topic)."""

    def mirrored() -> list[topic_mirror.MirrorRow]:
        return topic_mirror.mirror_once(
            servers,
            lambda: ask(router.topics.remote(), "the router"),
            lambda changes: ask(router.change_topics.remote(changes), "the router"),
            pattern=args.topic_pattern,
            dry_run=args.dry_run,
        )

    title = f"topics mirrored from {args.source}" + (
        " (dry run: nothing changed)" if args.dry_run else ""
    )
    if args.every_s is None:
        rows = mirrored()
        out.show("mirror", title, topic_mirror.table(rows), topic_mirror.COLUMNS)
        out.finish()
        refused = sum(row.refused for row in rows)
        if refused:
            raise ValueError(f"topics mirror: the catalog refused {refused} of the changes")
        return EXIT_OK
    first = True
    try:
        while True:
            now = iso_utc(int(time.time() * 1000))
            try:
                rows = mirrored()
            # The upstream cluster or the router is away, or the router stuck: say so, go on.
            except (ConnectionError, TimeoutError, RayError) as exc:
                print(f"groupcoord: {now} {_first_line(exc)}", file=sys.stderr, flush=True)
            else:
                changed = [r for r in rows if first or r.action in ("create", "grow")]
                if changed or first:
                    round_out = Output(out.as_json)
                    round_out.show(
                        "mirror",
                        f"{title} at {now}",
                        topic_mirror.table(changed),
                        topic_mirror.COLUMNS,
                    )
                    if out.as_json:
                        print(
                            json.dumps(msgspec.to_builtins({"at": now, **round_out.document})),
                            flush=True,
                        )
                first = False
            time.sleep(args.every_s)
    except KeyboardInterrupt:
        return EXIT_OK


def _first_line(exc: BaseException) -> str:
    """One line for a round that failed; the next round tries again."""
    return f"{first_line(exc)}; trying again next round"
