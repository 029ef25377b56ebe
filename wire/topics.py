"""Topic administration on the wire: CreateTopics, DeleteTopics and CreatePartitions.

groupcoord keeps no records, only a topic catalog ({topic: partition count}); these requests
are how Kafka's admin clients (``AdminClient.create_topics``, ``kafka-topics.sh``) set it. Each
request becomes a list of ``TopicChange`` for the catalog's owner, and its answers
(``TopicResult``, in the same order) become kio's response at the request's version.
Replication factors, replica assignments and configs describe storage groupcoord does not have:
they are accepted and ignored, and answered as a one-replica topic.
"""

from __future__ import annotations

import uuid

import msgspec
from kio.schema.errors import ErrorCode

from groupcoord.coordinator import Errors
from groupcoord.coordinator.group_config import GroupConfigOp

from . import apis
from .apis import ZERO_MS, ApiKey
from .builders import ZERO_TOPIC_ID
from .connection import WireRequest
from .translate import build

# Kafka's answer to num_partitions -1 (the broker's num.partitions default).
DEFAULT_PARTITIONS = 1
MAX_CHANGES_PER_REQUEST = 10_000  # topics in one CreateTopics/DeleteTopics/CreatePartitions


class TopicChange(msgspec.Struct, frozen=True):
    """A change to the topic catalog. ``kind``: "create", "grow" (to ``partitions``) or
    "delete" a topic; or, for group ``name``, "alter_group_configs" (IncrementalAlterConfigs)
    or "replace_group_configs" (AlterConfigs) by ``configs`` (``coordinator.group_config``);
    ``validate_only``: check, change nothing."""

    kind: str
    name: str
    partitions: int = 0
    validate_only: bool = False
    configs: tuple[GroupConfigOp, ...] = ()


class TopicResult(msgspec.Struct, frozen=True):
    """``topic_id``: a created topic's id (None: the zero id, as Kafka answers otherwise)."""

    error: Errors
    message: str | None = None
    partitions: int = -1
    topic_id: uuid.UUID | None = None


def too_many_changes(changes: list[TopicChange]) -> TopicResult | None:
    """The answer to every change of a request of more than ``MAX_CHANGES_PER_REQUEST``, else
    None. Kafka bounds these requests only by their bytes; the catalog's owner serves one at a
    time, so one request of a million topics would hold it for seconds."""
    if len(changes) <= MAX_CHANGES_PER_REQUEST:
        return None
    return TopicResult(
        Errors.INVALID_REQUEST,
        f"{len(changes)} topics in one request; the most is {MAX_CHANGES_PER_REQUEST}",
    )


def topic_changes(request: WireRequest) -> list[TopicChange]:
    """The catalog changes a CreateTopics, DeleteTopics or CreatePartitions request asks for."""
    body = request.body
    match request.api_key:
        case ApiKey.CREATE_TOPICS:
            return [
                TopicChange(
                    "create",
                    t.name,
                    DEFAULT_PARTITIONS if t.num_partitions == -1 else t.num_partitions,
                    body.validate_only,
                )
                for t in body.topics
            ]
        case ApiKey.CREATE_PARTITIONS:
            return [TopicChange("grow", t.name, t.count, body.validate_only) for t in body.topics]
        case ApiKey.DELETE_TOPICS:
            names = (
                [t.name for t in body.topics]
                if request.api_version >= 6
                else list(body.topic_names)
            )
            return [TopicChange("delete", name or "") for name in names]
    raise ValueError(f"api key {request.api_key} changes no topics")


# Per api: kio's result class and the response field listing the results. One builder serves
# all three, since ``build`` drops the fields a version does not have.
_RESULTS = {
    ApiKey.CREATE_TOPICS: ("CreatableTopicResult", "topics"),
    ApiKey.CREATE_PARTITIONS: ("CreatePartitionsTopicResult", "results"),
    ApiKey.DELETE_TOPICS: ("DeletableTopicResult", "responses"),
}


def topics_response(request: WireRequest, results: list[TopicResult]):
    """kio's answer to ``request`` from one ``TopicResult`` per ``topic_changes(request)``."""
    changes = topic_changes(request)
    if len(changes) != len(results):
        raise ValueError(f"{len(changes)} topics asked, {len(results)} answers")
    cls = apis.response_class(request.api_key, request.api_version)
    item_name, field = _RESULTS[ApiKey(request.api_key)]
    item = apis.nested_class(cls, item_name)
    answers = tuple(
        build(
            item,
            name=change.name,
            topic_id=ZERO_TOPIC_ID if result.topic_id is None else result.topic_id,
            error_code=_code(result.error),
            error_message=result.message,
            topic_config_error_code=_code(Errors.NONE),
            num_partitions=result.partitions,
            replication_factor=1 if result.error == Errors.NONE else -1,
            configs=(),
        )
        for change, result in zip(changes, results, strict=True)
    )
    return build(cls, throttle_time=ZERO_MS, **{field: answers})


def _code(error: Errors) -> ErrorCode:
    return ErrorCode(int(error))
