"""Membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup (the join phase that ends a
rebalance, and the deadlines, are in ``shard_rebalance``).

Part of ``Shard`` (see shard.py for the theory of operation). Method names follow Kafka's
``GroupCoordinator`` so the spec sections map onto them:

    _handle_join        spec §2.3   (new, static and current members)
    _handle_sync        spec §2.4
    _handle_heartbeat   spec §2.5
    _handle_leave       spec §2.6
"""

from __future__ import annotations

from .errors import Errors
from .group import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Group,
    Member,
)
from .messages import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    LeaveGroupResponseMember,
    SyncGroupResponse,
)
from .validation import join_request_ok, member_fields_ok

NONE = Errors.NONE
UNKNOWN_MEMBER_ID = Errors.UNKNOWN_MEMBER_ID


class MembershipMixin:
    # -- responses ------------------------------------------------------------------------------

    @staticmethod
    def _join_error(error: Errors, member_id: str) -> JoinGroupResponse:
        return JoinGroupResponse(error, -1, None, None, "", False, member_id, [])

    @staticmethod
    def _sync_error(error: Errors) -> SyncGroupResponse:
        return SyncGroupResponse(error, None, None, b"")

    def _answer_join(self, member: Member, group: Group, response: JoinGroupResponse) -> None:
        """Kafka's ``maybeInvokeJoinCallback``: answer the member's parked JoinGroup, if any."""
        if member.join_request is not None:
            self._reply(member.join_request, response)
            group.set_join_request(member, None)
            self._parked -= 1

    def _park_join(self, group: Group, member: Member, request_id) -> None:
        if member.join_request is not None:
            self._dropped.append(member.join_request)  # Kafka drops the earlier callback
        else:
            self._parked += 1
        group.set_join_request(member, request_id)

    def _generation_response(
        self,
        group: Group,
        member_id: str,
        with_members: bool,
        leader: str | None = None,
        skip: bool = False,
    ) -> JoinGroupResponse:
        return JoinGroupResponse(
            NONE,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id if leader is None else leader,
            skip,
            member_id,
            group.current_member_metadata() if with_members else [],
        )

    # -- JoinGroup (spec §2.3) ------------------------------------------------------------------

    def _handle_join(self, request_id, req) -> None:
        error = self._group_error(req.group_id)
        if error is None and not join_request_ok(req, self.config):
            error = Errors.INVALID_REQUEST
        if error is None and self._parked >= self.config.max_parked_requests:
            error = Errors.COORDINATOR_NOT_AVAILABLE
        if error is None and not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            error = Errors.INVALID_SESSION_TIMEOUT
        if error is not None:
            return self._reply(request_id, self._join_error(error, req.member_id))

        is_new_member = req.member_id == ""
        group = self._groups.get(req.group_id)
        if group is None:
            if not is_new_member:
                return self._reply(request_id, self._join_error(UNKNOWN_MEMBER_ID, req.member_id))
            group = self._new_group(req.group_id)
            if group is None:
                return self._reply(
                    request_id, self._join_error(Errors.COORDINATOR_NOT_AVAILABLE, "")
                )

        protocols = tuple((p.name, p.metadata) for p in req.protocols)
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            self._timer.cancel(("hb", group.group_id, req.member_id))
            self._timer.cancel(("pending", group.group_id, req.member_id))
            self._reply(request_id, self._join_error(Errors.GROUP_MAX_SIZE_REACHED, ""))
        elif not group.supports_protocols(req.protocol_type, {name for name, _ in protocols}):
            self._reply(
                request_id, self._join_error(Errors.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
            )
        elif is_new_member:
            self._join_new_member(request_id, group, req, protocols)
        else:
            self._join_current_member(request_id, group, req, protocols)

        if group.state is PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        state, max_size = group.state, self.config.group_max_size
        if state is EMPTY:
            return True
        member = group.members.get(member_id)
        if state is PREPARING_REBALANCE:
            return (
                member is not None and member.awaiting_join
            ) or group.num_awaiting_join < max_size
        return member is not None or len(group.members) < max_size

    def _join_new_member(self, request_id, group: Group, req, protocols) -> None:
        instance_id = req.group_instance_id
        new_member_id = f"{instance_id if instance_id is not None else req.client_id}-{self._ids()}"
        if instance_id is not None:
            old_member_id = group.static_members.get(instance_id)
            if old_member_id is not None:
                self._replace_static_member(
                    request_id, group, req, protocols, old_member_id, new_member_id
                )
            else:
                self._add_member_and_rebalance(request_id, group, req, protocols, new_member_id)
        elif req.require_known_member_id:
            group.pending_members[new_member_id] = None
            self._arm(("pending", group.group_id, new_member_id), req.session_timeout_ms)
            self._reply(request_id, self._join_error(Errors.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(request_id, group, req, protocols, new_member_id)

    def _join_current_member(self, request_id, group: Group, req, protocols) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            if req.group_instance_id is not None:
                # Pending ids are only handed to dynamic members (Kafka: IllegalStateException).
                return self._reply(
                    request_id, self._join_error(Errors.UNKNOWN_SERVER_ERROR, member_id)
                )
            self._timer.cancel(("pending", group.group_id, member_id))
            return self._add_member_and_rebalance(request_id, group, req, protocols, member_id)
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error is not None:
            return self._reply(request_id, self._join_error(error, member_id))
        member = group.members[member_id]
        state = group.state
        if state is PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                request_id,
                group,
                member,
                req,
                protocols,
                "member joining during PreparingRebalance",
            )
        elif state is COMPLETING_REBALANCE:
            if member.matches(protocols):
                # It missed its JoinGroup response: hand it the current generation again.
                self._reply(
                    request_id,
                    self._generation_response(
                        group, member_id, with_members=member_id == group.leader_id
                    ),
                )
            else:
                self._update_member_and_rebalance(
                    request_id, group, member, req, protocols, "member metadata changed"
                )
        elif state is STABLE:
            if member_id == group.leader_id:
                # The leader rejoins to make the group reassign (e.g. topic metadata changed).
                self._update_member_and_rebalance(
                    request_id, group, member, req, protocols, "leader rejoined"
                )
            elif not member.matches(protocols):
                self._update_member_and_rebalance(
                    request_id, group, member, req, protocols, "member metadata changed"
                )
            else:
                self._reply(request_id, self._generation_response(group, member_id, False))
        else:  # Empty: the group forgot this member
            self._reply(request_id, self._join_error(UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(
        self, request_id, group: Group, req, protocols, member_id: str
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            protocols,
        )
        member.is_new = True
        if group.state is PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True  # lets the initial join phase extend itself
        group.add(member)
        self._park_join(group, member, request_id)
        # A new member cannot heartbeat before its JoinGroup returns, so the session timeout
        # cannot protect against abandoned joins: the new-member join timeout does.
        self._reset_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined")

    def _update_member_and_rebalance(
        self, request_id, group: Group, member: Member, req, protocols, reason: str
    ) -> None:
        group.update_member(
            member, protocols, req.rebalance_timeout_ms, req.session_timeout_ms, member.join_request
        )
        self._park_join(group, member, request_id)
        self._maybe_prepare_rebalance(group, f"{reason} ({member.member_id})")

    def _replace_static_member(
        self, request_id, group: Group, req, protocols, old_member_id: str, new_member_id: str
    ) -> None:
        """Spec §2.3.1: a static member rejoined without its member id."""
        member = group.members[old_member_id]
        # Fence whoever still holds the old id.
        self._answer_join(member, group, self._join_error(Errors.FENCED_INSTANCE_ID, old_member_id))
        if member.sync_request is not None:
            self._reply(member.sync_request, self._sync_error(Errors.FENCED_INSTANCE_ID))
            member.sync_request = None
            self._parked -= 1
        self._timer.cancel(("hb", group.group_id, old_member_id))
        group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        if group.pending_sync.pop(old_member_id, 0) is None:
            group.pending_sync[new_member_id] = None  # the new id still owes the SyncGroup
        self._reset_heartbeat(group, member)
        group.update_member(
            member, protocols, req.rebalance_timeout_ms, req.session_timeout_ms, None
        )
        self._park_join(group, member, request_id)
        state = group.state
        if state is STABLE:
            same_protocol = group.select_protocol() == group.protocol_name
            value = group.metadata_value() if same_protocol else None
            if value is not None and self._group_record_fits(group, value):
                self._persist_group(group, value)
                is_leader = new_member_id == group.leader_id
                self._answer_join(
                    member,
                    group,
                    self._generation_response(
                        group, new_member_id, with_members=is_leader, skip=is_leader
                    ),
                )
            else:
                # Kafka reverts the id and fails the JoinGroup when this record cannot be
                # stored; a rebalance is simpler and as safe: nothing is written, and the
                # leader's SyncGroup checks the size of the next record again.
                why = "with new protocols" if value is None else "and its group record is too large"
                self._maybe_prepare_rebalance(
                    group, f"static member {req.group_instance_id} rejoined {why}"
                )
        elif state is COMPLETING_REBALANCE:
            # The leader may already be assigning to the old id: start over.
            self._prepare_rebalance(group, f"static member {req.group_instance_id} replaced")

    # -- SyncGroup (spec §2.4) ------------------------------------------------------------------

    def _handle_sync(self, request_id, req) -> None:
        error = self._group_error(req.group_id)
        if error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
            error = Errors.REBALANCE_IN_PROGRESS  # the rebalance state was lost: rejoin
        if len(req.assignments) > self.config.max_members_per_request:
            error = Errors.INVALID_REQUEST
        if error is None and not member_fields_ok(
            req.member_id, req.group_instance_id, req.generation_id, self.config
        ):
            error = Errors.INVALID_REQUEST
        if error is None and self._parked >= self.config.max_parked_requests:
            error = Errors.COORDINATOR_NOT_AVAILABLE
        group = self._groups.get(req.group_id) if error is None else None
        if error is None and group is None:
            error = UNKNOWN_MEMBER_ID
        if error is None:
            error = self._validate_member(group, req.member_id, req.group_instance_id)
        if error is None:
            if req.generation_id != group.generation_id:
                error = Errors.ILLEGAL_GENERATION
            elif (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
                req.protocol_name is not None and req.protocol_name != group.protocol_name
            ):
                error = Errors.INCONSISTENT_GROUP_PROTOCOL
            elif group.state is EMPTY:
                error = UNKNOWN_MEMBER_ID
            elif group.state is PREPARING_REBALANCE:
                error = Errors.REBALANCE_IN_PROGRESS
        if error is not None:
            return self._reply(request_id, self._sync_error(error))

        member = group.members[req.member_id]
        self._remove_pending_sync_member(group, member.member_id)
        if group.state is STABLE:
            self._reply(
                request_id,
                SyncGroupResponse(
                    NONE, group.protocol_type, group.protocol_name, member.assignment
                ),
            )
            return self._reset_heartbeat(group, member)
        # CompletingRebalance: park until the leader's assignment is durable.
        if member.sync_request is not None:
            self._dropped.append(member.sync_request)
        else:
            self._parked += 1
        member.sync_request = request_id
        if member.member_id == group.leader_id:
            self._complete_sync(group, {a.member_id: a.assignment for a in req.assignments})

    def _complete_sync(self, group: Group, assignments: dict[str, bytes]) -> None:
        full = {member_id: assignments.get(member_id, b"") for member_id in group.members}
        value = group.metadata_value(full)
        if not self._group_record_fits(group, value):
            # Kafka's storeGroup failure path: RECORD_LIST_TOO_LARGE maps to UNKNOWN_SERVER_ERROR.
            self._reset_and_propagate_assignment_error(group, Errors.UNKNOWN_SERVER_ERROR)
            return self._maybe_prepare_rebalance(group, "group record too large")
        self._persist_group(group, value)
        for member in group.members.values():
            member.assignment = full[member.member_id]
        self._propagate_assignment(group, NONE)
        group.transition_to(STABLE, self._now)
        self._event("stable", group.group_id, f"generation {group.generation_id}")

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync.pop(member_id, None)
        if not group.pending_sync:
            self._timer.cancel(("sync", group.group_id))  # DelayedSync completes

    def _propagate_assignment(self, group: Group, error: Errors) -> None:
        ok = error is NONE
        protocol_type = group.protocol_type if ok else None
        protocol_name = group.protocol_name if ok else None
        for member in group.members.values():
            if member.sync_request is not None:
                self._reply(
                    member.sync_request,
                    SyncGroupResponse(error, protocol_type, protocol_name, member.assignment),
                )
                member.sync_request = None
                self._parked -= 1
                # A session that lapsed while the sync was parked was ignored: start a new one.
                self._reset_heartbeat(group, member)

    def _reset_and_propagate_assignment_error(self, group: Group, error: Errors) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    # -- Heartbeat (spec §2.5, §4.5) --------------------------------------------------------------

    def _handle_heartbeat(self, request_id, req) -> None:
        group = self._groups.get(req.group_id) if req.group_id else None
        if group is None or not self.owned:
            error = self._group_error(req.group_id)
            if error is None:
                error = UNKNOWN_MEMBER_ID
            elif error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
                error = NONE  # answered blindly while loading
            return self._reply(request_id, HeartbeatResponse(error))
        error = self._validate_member(group, req.member_id, req.group_instance_id)
        if error is not None or req.generation_id != group.generation_id:
            # A current member of the current generation passed these checks when it joined;
            # only a failing request can hold values no Kafka client could send.
            if not member_fields_ok(
                req.member_id, req.group_instance_id, req.generation_id, self.config
            ):
                error = Errors.INVALID_REQUEST
            elif error is None:
                error = Errors.ILLEGAL_GENERATION
        elif group.state is EMPTY:
            error = UNKNOWN_MEMBER_ID
        else:
            self._reset_heartbeat(group, group.members[req.member_id])
            error = Errors.REBALANCE_IN_PROGRESS if group.state is PREPARING_REBALANCE else NONE
        self._reply(request_id, HeartbeatResponse(error))

    def _reset_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """Kafka's ``completeAndScheduleNextHeartbeatExpiration``.

        A member parked in a join or sync already satisfies the heartbeat expectation (unless it
        is new), so Kafka's new DelayedHeartbeat completes at once: no deadline until the next
        reset. Otherwise the deadline moves to now + timeout.
        """
        key = ("hb", group.group_id, member.member_id)
        if not member.is_new and (
            member.join_request is not None or member.sync_request is not None
        ):
            self._timer.cancel(key)
            return
        delay_ms = member.session_timeout_ms if timeout_ms is None else timeout_ms
        if delay_ms > 0:
            self._timer.schedule(key, self._now + delay_ms)  # every heartbeat: skip _arm
        else:
            self._arm(key, delay_ms)

    def _validate_member(
        self, group: Group, member_id: str, instance_id: str | None
    ) -> Errors | None:
        """Kafka's ``validateCurrentMember`` (spec §2.2)."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return UNKNOWN_MEMBER_ID
            if current != member_id:
                return Errors.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return UNKNOWN_MEMBER_ID
        return None

    # -- LeaveGroup (spec §2.6) -----------------------------------------------------------------

    def _handle_leave(self, request_id, req) -> None:
        if len(req.members) > self.config.max_members_per_request:
            error = Errors.INVALID_REQUEST  # bounded before any other work
        else:
            error = self._group_error(req.group_id)
        if error is None and not all(
            member_fields_ok(m.member_id, m.group_instance_id, 0, self.config) for m in req.members
        ):
            error = Errors.INVALID_REQUEST
        if error is not None:
            return self._reply(request_id, LeaveGroupResponse(error, []))
        group = self._groups.get(req.group_id)
        results = []
        for identity in req.members:
            results.append(
                LeaveGroupResponseMember(
                    identity.member_id,
                    identity.group_instance_id,
                    UNKNOWN_MEMBER_ID if group is None else self._leave_one(group, identity),
                )
            )
        self._reply(request_id, LeaveGroupResponse(NONE, results))

    def _leave_one(self, group: Group, identity) -> Errors:
        member_id, instance_id = identity.member_id, identity.group_instance_id
        reason = f"member left ({identity.reason or 'no reason given'})"
        if member_id == "":
            # Administrative removal by instance id.
            current = group.static_members.get(instance_id) if instance_id is not None else None
            if current is None:
                return UNKNOWN_MEMBER_ID
            self._remove_member_and_update_group(group, group.members[current], reason)
            return NONE
        if member_id in group.pending_members:
            self._remove_pending_member(group, member_id)
            return NONE
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        self._remove_member_and_update_group(group, group.members[member_id], reason)
        return NONE

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        # A new member may still be parked in the join phase: tell it to rejoin.
        self._answer_join(member, group, self._join_error(UNKNOWN_MEMBER_ID, ""))
        if member.sync_request is not None:  # Kafka never answers it: release it
            self._dropped.append(member.sync_request)
            member.sync_request = None
            self._parked -= 1
        group.remove(member.member_id)
        self._timer.cancel(("hb", group.group_id, member.member_id))
        self._event("member_removed", group.group_id, f"{member.member_id}: {reason}")
        if group.state is STABLE or group.state is COMPLETING_REBALANCE:
            self._maybe_prepare_rebalance(group, reason)
        elif group.state is PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _remove_pending_member(self, group: Group, member_id: str) -> None:
        group.remove(member_id)
        self._timer.cancel(("pending", group.group_id, member_id))
        if group.state is PREPARING_REBALANCE:
            self._try_complete_join(group)
