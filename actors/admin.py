"""Admin client: Kafka's AdminClient group operations and kafka-consumer-groups' offset resets.

Every operation goes to the coordinator of its group through a ``CoordinatorChannel`` (so it
rides out failovers like a member does); ``list_groups`` asks the router, which asks every
partition. Each call to a coordinator or the router ends within ``timeout_ms``
(``CoordinatorUnavailable``, or ``AdminError`` REQUEST_TIMED_OUT for ``list_groups``), even
when one never answers. Partitions and offsets are checked before anything is sent
(offsets.py). Results are plain frozen Structs, ready for tables and ``--json``.

Offset resets follow ``kafka-consumer-groups --reset-offsets``: only a group without active
members (Empty, or unknown) may be reset; the new offsets are committed as a non-member
(generation -1), which the coordinator refuses for a group that has members. Log start/end
offsets live outside groupcoord (there is no broker here): describe and reset take an
``EndOffsetsFn`` (end_offsets.py) that answers for the partitions it knows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

import msgspec
from ray.exceptions import RayActorError

from groupcoord.coordinator import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    Errors,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    TopicPartition,
)
from groupcoord.coordinator.consumer_messages import DescribedConsumerGroup
from groupcoord.coordinator.consumer_protocol import decode_assignment

from .bounded import bounded
from .channel import CoordinatorChannel, RouterHandle
from .end_offsets import EndOffsetsFn
from .offset_reset import plan_reset
from .offsets import checked_offset, checked_offsets, checked_partitions

MAX_GROUPS_PER_CALL = 10_000
ADMIN_TIMEOUT_MS = 30_000
RESETTABLE_STATES = frozenset({"Empty", "Dead"})


class AdminError(RuntimeError):
    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error


class MemberDescription(msgspec.Struct, frozen=True):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]  # a consumer group's: the member's current one
    # KIP-848 consumer groups only (None in a classic group): the member's epoch and the
    # assignment the coordinator wants it to reach.
    member_epoch: int | None = None
    target_assignment: tuple[tuple[str, int], ...] | None = None


class PartitionOffset(msgspec.Struct, frozen=True):
    """A partition the group owns or has an offset for; None where a value is not known
    (no committed offset yet, no end offset from the source, no owner)."""

    topic: str
    partition: int
    committed_offset: int | None
    end_offset: int | None = None
    lag: int | None = None
    owner: str | None = None  # member id of the current owner, if any
    leader_epoch: int | None = None  # the committed offset's leader epoch, if it has one


class PartitionStatus(msgspec.Struct, frozen=True):
    """One partition actor as it reports itself (``info()``): where it runs and how it is."""

    partition: int
    state: str  # loading | serving | load_failed | failed | closed | broken | unreachable
    epoch: int
    node_id: str  # the Ray node it runs on ("" when unreachable)
    pid: int
    groups: int
    load_seconds: float | None = None
    loaded_at_ms: int | None = None  # wall-clock time it started serving
    error: str | None = None


def partition_status(n: int, info: dict | BaseException) -> PartitionStatus:
    """A partition's status from its ``info()`` (or the exception asking for it raised)."""
    if isinstance(info, BaseException):
        return PartitionStatus(n, "unreachable", -1, "", 0, 0, error=repr(info)[:300])
    why = info.get("load_error") or info.get("init_error") or info.get("fatal_error")
    return PartitionStatus(
        n,
        info["state"],
        info["epoch"],
        info.get("node", ""),
        info.get("pid", 0),
        info.get("groups", 0),
        info.get("load_seconds"),
        info.get("loaded_at_ms"),
        why,
    )


class GroupDescription(msgspec.Struct, frozen=True):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    generation_id: int
    leader: str
    members: tuple[MemberDescription, ...]
    offsets: tuple[PartitionOffset, ...] = ()
    error: str = "NONE"
    # "classic" or "consumer" (KIP-848); a consumer group's protocol is its assignor,
    # generation_id its group epoch, and it has an assignment epoch (None for classic).
    group_type: str = "classic"
    assignment_epoch: int | None = None


def _assignment_of(raw: bytes, protocol_type: str) -> tuple[tuple[str, int], ...]:
    if protocol_type != "consumer" or not raw:
        return ()
    try:
        return tuple(sorted(decode_assignment(raw).partitions))
    except ValueError:
        return ()


def _partitions_of(assignment) -> tuple[tuple[str, int], ...]:
    return tuple(
        sorted((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)
    )


def _consumer_description(g: DescribedConsumerGroup) -> GroupDescription:
    """A KIP-848 consumer group (ConsumerGroupDescribe) in the admin's shape."""
    members = tuple(
        MemberDescription(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            _partitions_of(m.assignment),
            m.member_epoch,
            _partitions_of(m.target_assignment),
        )
        for m in g.members
    )
    return GroupDescription(
        g.group_id,
        g.group_state,
        "consumer",
        g.assignor_name,
        g.group_epoch,
        "",
        members,
        group_type="consumer",
        assignment_epoch=g.assignment_epoch,
    )


class AdminClient:
    def __init__(self, router: RouterHandle, *, timeout_ms: int = ADMIN_TIMEOUT_MS) -> None:
        self.router = router
        self.timeout_ms = timeout_ms

    def _channel(self, group_id: str) -> CoordinatorChannel:
        if not isinstance(group_id, str):
            raise ValueError(f"group_id must be a str, got {type(group_id).__name__}")
        return CoordinatorChannel(self.router, group_id, timeout_ms=self.timeout_ms)

    @staticmethod
    def _group_ids(group_ids: Iterable[str]) -> list[str]:
        if isinstance(group_ids, str):  # iterating "orders" would name groups o, r, d, ...
            raise ValueError(f"give a list of group ids, not the string {group_ids!r}")
        ids = list(dict.fromkeys(group_ids))
        if len(ids) > MAX_GROUPS_PER_CALL:
            raise ValueError(f"at most {MAX_GROUPS_PER_CALL} groups per call")
        return ids

    async def list_groups(self, states: Iterable[str] = ()) -> list:
        """Every group (ListedGroup structs), optionally only in ``states``; retried while a
        partition is loading or the router is restarting."""
        if isinstance(states, str):
            raise ValueError(f"give a list of states, not the string {states!r}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        while True:
            try:
                response = await bounded(
                    self.router.list_groups.remote(list(states)), max(deadline - loop.time(), 0)
                )
            except TimeoutError:  # the router, or a partition it asks, is stuck
                raise AdminError(
                    Errors.REQUEST_TIMED_OUT, f"no answer to ListGroups within {self.timeout_ms} ms"
                ) from None
            except RayActorError as exc:  # the router is restarting: Ray brings it back
                error, why = Errors.COORDINATOR_NOT_AVAILABLE, f"router unavailable ({exc!r})"
            else:
                if response.error == Errors.NONE:
                    return response.groups
                error, why = response.error, "ListGroups did not complete"
            if loop.time() > deadline:
                raise AdminError(error, why)
            await asyncio.sleep(0.1)

    async def partitions(self) -> list[PartitionStatus]:
        """Every partition's node, epoch, state, load time and group count, in partition order;
        one that does not answer within ``timeout_ms`` is ``unreachable``."""
        timeout_s = self.timeout_ms / 1000
        try:
            handles = await bounded(self.router.partitions.remote(), timeout_s)
        except (TimeoutError, RayActorError) as exc:
            raise AdminError(Errors.COORDINATOR_NOT_AVAILABLE, f"router: {exc!r}") from None

        async def one(handle) -> dict | BaseException:
            try:
                return await bounded(handle.info.remote(), timeout_s)
            except (TimeoutError, RayActorError) as exc:
                return exc

        infos = await asyncio.gather(*(one(h) for h in handles))
        return [partition_status(n, info) for n, info in enumerate(infos)]

    async def describe_groups(
        self,
        group_ids: Iterable[str],
        *,
        with_offsets: bool = False,
        end_offsets: EndOffsetsFn | None = None,
    ) -> list[GroupDescription]:
        """Describe groups (unknown ones come back state Dead; KIP-848 consumer groups through
        ConsumerGroupDescribe, ``group_type`` "consumer"). ``with_offsets`` adds a row per
        partition the group owns or has committed (Kafka's describe); ``end_offsets`` adds each
        partition's end offset and lag where it knows them (None elsewhere)."""
        ids = self._group_ids(group_ids)
        return list(
            await asyncio.gather(
                *(
                    self._describe_one(g, with_offsets or end_offsets is not None, end_offsets)
                    for g in ids
                )
            )
        )

    async def _describe_one(self, group_id, with_offsets, end_offsets) -> GroupDescription:
        channel = self._channel(group_id)
        described = (await channel.call(DescribeGroupsRequest([group_id]))).groups[0]
        if described.error == Errors.NONE and described.group_state == "Dead":
            # DescribeGroups calls a consumer group (KIP-848) Dead, as Kafka does: ask
            # ConsumerGroupDescribe, as Kafka's admin client does.
            consumer = (await channel.call(ConsumerGroupDescribeRequest([group_id]))).groups[0]
            if consumer.error_code == Errors.NONE:
                return await self._with_offsets(
                    _consumer_description(consumer), with_offsets, end_offsets
                )
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                _assignment_of(m.member_assignment, described.protocol_type),
            )
            for m in described.members
        )
        description = GroupDescription(
            group_id,
            described.group_state,
            described.protocol_type,
            described.protocol_data,
            described.generation_id,
            described.leader,
            members,
            (),
            described.error.name,
        )
        return await self._with_offsets(description, with_offsets, end_offsets)

    async def _with_offsets(
        self, d: GroupDescription, with_offsets: bool, end_offsets: EndOffsetsFn | None
    ) -> GroupDescription:
        """``d`` with a row per partition the group owns or has an offset for, if asked."""
        if not with_offsets or d.error != Errors.NONE.name:
            return d
        owners = {tp: m.member_id for m in d.members for tp in m.assignment}
        fetched = await self._fetched(d.group_id, None)
        committed = {(p.topic, p.partition): p.committed_offset for p in fetched}
        epochs = {(p.topic, p.partition): p.committed_leader_epoch for p in fetched}
        partitions = sorted(set(committed) | set(owners))
        ends: Mapping[tuple[str, int], int] = {}
        if end_offsets is not None and partitions:
            # In a thread: a source may block on I/O (a Kafka cluster's ListOffsets).
            ends = await asyncio.to_thread(end_offsets, partitions)
        rows = []
        for tp in partitions:
            offset = committed.get(tp, -1)
            current = offset if offset >= 0 else None
            end = ends.get(tp)
            lag = None if end is None or current is None else max(end - current, 0)
            epoch = epochs.get(tp, -1)
            rows.append(
                PartitionOffset(
                    tp[0], tp[1], current, end, lag, owners.get(tp), epoch if epoch >= 0 else None
                )
            )
        return msgspec.structs.replace(d, offsets=tuple(rows))

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, Errors]:
        """Delete groups that have no members (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND for
        unknown ones); returns group -> error."""
        ids = self._group_ids(group_ids)

        async def one(group_id: str) -> Errors:
            response = await self._channel(group_id).call(DeleteGroupsRequest([group_id]))
            return response.results[0].error

        return dict(zip(ids, await asyncio.gather(*(one(g) for g in ids)), strict=True))

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]] | None = None,
    ) -> dict[tuple[str, int], int]:
        checked = checked_partitions(partitions)
        return {
            (p.topic, p.partition): p.committed_offset
            for p in await self._fetched(group_id, checked)
        }

    async def _fetched(self, group_id: str, partitions: list[tuple[str, int]] | None) -> list:
        """OffsetFetch's partitions (``partitions`` checked, or None for all)."""
        tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        response = await self._channel(group_id).call(OffsetFetchRequest(group_id, tps))
        if response.error != Errors.NONE:
            raise AdminError(response.error, f"OffsetFetch for {group_id!r}")
        return response.partitions

    async def delete_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], Errors]:
        """KIP-496 OffsetDelete: partitions the group still subscribes to are refused
        (GROUP_SUBSCRIBED_TO_TOPIC)."""
        if partitions is None:
            raise ValueError("name the partitions whose offsets to delete")
        tps = [TopicPartition(t, p) for t, p in checked_partitions(partitions)]
        response = await self._channel(group_id).call(OffsetDeleteRequest(group_id, tps))
        if response.error != Errors.NONE:
            raise AdminError(response.error, f"OffsetDelete for {group_id!r}")
        return {(p.topic, p.partition): p.error for p in response.partitions}

    async def alter_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Kafka's alterConsumerGroupOffsets for a group without active members: commit
        ``offsets`` as a non-member. Refused (AdminError NON_EMPTY_GROUP) while the group has
        members, before anything is written."""
        new = checked_offsets(offsets)
        (described,) = await self.describe_groups([group_id])
        if described.state not in RESETTABLE_STATES:
            raise AdminError(
                Errors.NON_EMPTY_GROUP,
                f"offsets of group {group_id!r} can only be reset while it is inactive, but "
                f"its current state is {described.state}; stop its members first",
            )
        if not new:
            return
        response = await self._channel(group_id).call(
            OffsetCommitRequest(
                group_id,
                -1,
                "",
                [OffsetCommitRequestPartition(t, p, o) for (t, p), o in sorted(new.items())],
            )
        )
        errors = {
            (p.topic, p.partition): p.error for p in response.partitions if p.error != Errors.NONE
        }
        if errors:
            error = next(iter(errors.values()))
            raise AdminError(error, f"reset of {group_id!r} refused for {sorted(errors)}")

    async def reset_offsets(
        self,
        group_id: str,
        *,
        to_offset: int | None = None,
        to_earliest: EndOffsetsFn | None = None,
        to_latest: EndOffsetsFn | None = None,
        partitions: Iterable[tuple[str, int]] | None = None,
    ) -> dict[tuple[str, int], int]:
        """Reset the group's offsets (all committed partitions unless ``partitions`` is given)
        to one offset, or to the log-start (``to_earliest``) or log-end (``to_latest``) offsets
        those sources give. Returns the offsets written. Refused (AdminError NON_EMPTY_GROUP)
        while the group has members; ResetError when a source lacks a partition."""
        chosen = [x is not None for x in (to_offset, to_earliest, to_latest)]
        if sum(chosen) != 1:
            raise ValueError("give exactly one of to_offset, to_earliest, to_latest")
        if to_offset is not None:
            checked_offset(to_offset, "to_offset")
        chosen_partitions = checked_partitions(partitions)
        targets = (
            sorted(set(chosen_partitions))
            if chosen_partitions is not None
            else sorted(await self.fetch_offsets(group_id))
        )
        if to_earliest is not None:
            new, _ = plan_reset("to-earliest", targets, {}, start=to_earliest(targets))
        elif to_latest is not None:
            new, _ = plan_reset("to-latest", targets, {}, end=to_latest(targets))
        else:
            new, _ = plan_reset("to-offset", targets, {}, value=to_offset)
        await self.alter_offsets(group_id, new)
        return new


def offsets_table(mapping: Mapping[tuple[str, int], int]) -> list[dict]:
    return [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(mapping.items())]
