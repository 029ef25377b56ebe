"""Many sockets' sends in one system call (io_uring), so one turn's answers cost one preemption.

Why: a partition's loop thread answers a turn's commits one socket at a time, and on loopback
each send wakes the client's thread inside the call; the kernel's fair share lets that thread
take the CPU at the call's return, so the loop thread was preempted at most sends (~7,400
times a second at 64 members on two cores; bench/wire-findings.md). Queued to an io_uring and
submitted together, every send still wakes its client, but the loop thread can be preempted
only once, when the one call returns.

``BatchSender.send(items)`` takes ``(fd, data)`` pairs (distinct descriptors: the caller joins
a connection's frames) and returns, per pair, the bytes the kernel took or ``-errno``. Every
send is non-blocking (``MSG_DONTWAIT``, which io_uring honours by failing with ``EAGAIN``
rather than waiting for room) and raises no SIGPIPE (``MSG_NOSIGNAL``); what a send did not
take is the caller's to queue (a transport's ``write``). The call returns only once every
send has completed, so no buffer is referenced after it, and a descriptor closed afterwards is
never written.

``open_batch_sender()`` returns ``None`` where the kernel has no io_uring, has it disabled
(``kernel.io_uring_disabled``), or a sandbox forbids it (containers' default seccomp profile):
the caller then writes each socket itself, as before. Linux on x86-64 and arm64 only.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import platform
import struct
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("groupcoord.listener")

# callback -> None: call it once, at the end of the partition's loop turn
# (``PartitionRuntime.call_at_turn_end``).
AtTurnEnd = Callable[[Callable[[], None]], None]

# System call numbers (the same on x86-64 and arm64's generic table).
_SYS_IO_URING_SETUP = 425
_SYS_IO_URING_ENTER = 426
_IORING_SETUP_SUBMIT_ALL = 1 << 7  # a failed submission does not stop the ones after it
_IORING_ENTER_GETEVENTS = 1
_IORING_FEAT_SINGLE_MMAP = 1
_IORING_OP_SEND = 26
_IORING_OFF_SQ_RING = 0
_IORING_OFF_CQ_RING = 0x8000000
_IORING_OFF_SQES = 0x10000000
_MSG_DONTWAIT = 0x40
_MSG_NOSIGNAL = 0x4000
_SQE_BYTES = 64
_CQE_BYTES = 16
# struct io_uring_params: 10 u32 (sq/cq entries, flags, sq_thread_cpu/idle, features, wq_fd,
# resv[3]), io_sqring_offsets (8 u32 + u64), io_cqring_offsets (8 u32 + u64).
_PARAMS = struct.Struct("<10I8IQ8IQ")
# struct io_uring_sqe for a send: opcode, flags, ioprio, fd, off, addr, len, msg_flags,
# user_data; the rest (buf_index .. pad) stays zero.
_SQE = struct.Struct("<BBHiQQIIQ")
_CQE = struct.Struct("<QiI")
_U32 = struct.Struct("<I")
MAX_BATCH = 1024  # sends per submission (the ring's size)
# Bytes a connection may queue for a turn's end; past it they go to its transport at once,
# whose high-water mark (64 KiB by default) then pauses the answering, as without batching.
MAX_QUEUED_BYTES = 64 * 1024
_long = ctypes.c_long  # syscall(2) is variadic: pass whole registers


def _syscall() -> ctypes._CFuncPtr | None:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    function = libc.syscall
    function.restype = ctypes.c_long
    return function


class BatchSender:
    """One io_uring for one thread's sends (not thread-safe; see the module docstring)."""

    def __init__(self, ring_fd: int, params: tuple[int, ...], syscall: ctypes._CFuncPtr) -> None:
        self._fd = ring_fd
        self._syscall = syscall
        sq_entries, cq_entries, _, _, _, features = params[:6]
        sq_head, sq_tail, sq_mask, _, _, _, sq_array = params[10:17]
        cq_head, cq_tail, cq_mask, _, _, cqes = params[19:25]
        sq_bytes = sq_array + sq_entries * 4
        cq_bytes = cqes + cq_entries * _CQE_BYTES
        if features & _IORING_FEAT_SINGLE_MMAP:
            sq_bytes = cq_bytes = max(sq_bytes, cq_bytes)
        self._sq = mmap.mmap(ring_fd, sq_bytes, offset=_IORING_OFF_SQ_RING)
        self._cq = (
            self._sq
            if features & _IORING_FEAT_SINGLE_MMAP
            else mmap.mmap(ring_fd, cq_bytes, offset=_IORING_OFF_CQ_RING)
        )
        self._sqes = mmap.mmap(ring_fd, sq_entries * _SQE_BYTES, offset=_IORING_OFF_SQES)
        self._sq_entries = sq_entries
        # The params hold offsets into the rings; the masks themselves are in the rings.
        self._sq_head, self._sq_tail = sq_head, sq_tail
        self._sq_mask = _U32.unpack_from(self._sq, sq_mask)[0]
        self._cq_head, self._cq_tail, self._cqes = cq_head, cq_tail, cqes
        self._cq_mask = _U32.unpack_from(self._cq, cq_mask)[0]
        # The SQ array maps ring slots to SQEs: the identity, written once.
        for slot in range(sq_entries):
            _U32.pack_into(self._sq, sq_array + slot * 4, slot)

    def send(self, items: list[tuple[int, bytes]]) -> list[int]:
        """Send each ``(fd, data)``; per item, the bytes taken or ``-errno`` (module docstring).
        ValueError for more than ``MAX_BATCH`` items."""
        count = len(items)
        if count > min(MAX_BATCH, self._sq_entries):
            raise ValueError(f"at most {min(MAX_BATCH, self._sq_entries)} sends a batch")
        if not count:
            return []
        sq, sqes = self._sq, self._sqes
        tail = _U32.unpack_from(sq, self._sq_tail)[0]
        mask = self._sq_mask
        flags = _MSG_DONTWAIT | _MSG_NOSIGNAL
        buffers = []  # holds the data's buffers (their addresses are in the ring) until return
        for index, (fd, data) in enumerate(items):
            buffer = ctypes.c_char_p(data)
            buffers.append(buffer)
            address = ctypes.cast(buffer, ctypes.c_void_p).value or 0
            slot = (tail + index) & mask
            _SQE.pack_into(
                sqes,
                slot * _SQE_BYTES,
                _IORING_OP_SEND,
                0,
                0,
                fd,
                0,
                address,
                len(data),
                flags,
                index,
            )
        # x86-64 and arm64 (with the kernel's acquire on its side) see the entries before the
        # tail; the mmap slice assignment is a plain store.
        _U32.pack_into(sq, self._sq_tail, (tail + count) & 0xFFFFFFFF)
        results = [0] * count
        done = 0
        while done < count:
            submit = count if done == 0 else 0
            got = self._syscall(
                _long(_SYS_IO_URING_ENTER),
                _long(self._fd),
                _long(submit),
                _long(count - done),
                _long(_IORING_ENTER_GETEVENTS),
                None,
                _long(0),
            )
            if got < 0:
                errno = ctypes.get_errno()
                if errno == 4:  # EINTR: the sends are in; wait for the rest
                    continue
                raise OSError(errno, os.strerror(errno))
            done += self._reap(results)
        return results

    def _reap(self, results: list[int]) -> int:
        cq = self._cq
        head = _U32.unpack_from(cq, self._cq_head)[0]
        tail = _U32.unpack_from(cq, self._cq_tail)[0]
        reaped = 0
        while head != tail:
            offset = self._cqes + (head & self._cq_mask) * _CQE_BYTES
            user_data, result, _ = _CQE.unpack_from(cq, offset)
            results[user_data] = result
            head = (head + 1) & 0xFFFFFFFF
            reaped += 1
        _U32.pack_into(cq, self._cq_head, head)
        return reaped

    def close(self) -> None:
        for ring in {id(m): m for m in (self._sq, self._cq, self._sqes)}.values():
            ring.close()
        os.close(self._fd)


def open_batch_sender(entries: int = 256) -> BatchSender | None:
    """A ``BatchSender`` with room for ``entries`` sends a batch, or None where io_uring
    cannot be used here (module docstring)."""
    syscall = _syscall()
    if syscall is None:
        return None
    raw = ctypes.create_string_buffer(_PARAMS.size)
    _PARAMS.pack_into(raw, 0, 0, 0, _IORING_SETUP_SUBMIT_ALL, *([0] * 25))
    ring_fd = syscall(_long(_SYS_IO_URING_SETUP), _long(entries), raw)
    if ring_fd < 0:
        return None  # ENOSYS, EPERM (disabled or seccomp), EINVAL (a kernel before 5.18)
    try:
        return BatchSender(ring_fd, _PARAMS.unpack(raw.raw), syscall)
    except (OSError, ValueError):
        os.close(ring_fd)
        return None


class Writer(Protocol):
    """A connection, as ``TurnSends`` sees it: its socket's number, whether that number
    still names its socket (``sendable``: false once its transport is closing, since the
    transport may close the socket before the connection hears of it, and the number be
    reused by the next accept), and its transport's ``write`` (``transport_write``), which
    buffers what the socket does not take."""

    fd: int

    def sendable(self) -> bool: ...

    def transport_write(self, data: bytes) -> None: ...


class TurnSends:
    """A loop turn's answers, queued per connection and sent in one ``BatchSender`` call at the
    turn's end (``at_turn_end``); a turn that answered one connection writes through its
    transport instead (one send has no preemption to save, and costs less than the ring's
    call: 10–14 µs of a commit on one connection, bench/wire-findings.md). Not thread-safe:
    the partition's loop thread only."""

    def __init__(self, sender: BatchSender, at_turn_end: AtTurnEnd) -> None:
        self._sender: BatchSender | None = sender
        self._at_turn_end = at_turn_end
        self._queued: dict[Writer, list[bytes]] = {}
        self._queued_bytes: dict[Writer, int] = {}

    @classmethod
    def open(cls, at_turn_end: AtTurnEnd) -> TurnSends | None:
        """None where io_uring cannot be used here (``open_batch_sender``)."""
        sender = open_batch_sender(MAX_BATCH)
        return None if sender is None else cls(sender, at_turn_end)

    def queue(self, writer: Writer, frame: bytes) -> None:
        """Send ``frame`` at the turn's end, after what ``writer`` has queued already (or now,
        through its transport, with them, past ``MAX_QUEUED_BYTES``); the caller makes sure
        nothing of the writer's is buffered elsewhere meanwhile."""
        queued = self._queued
        if writer in queued:
            queued[writer].append(frame)
            self._queued_bytes[writer] += len(frame)
            if self._queued_bytes[writer] > MAX_QUEUED_BYTES:
                self.take_back(writer)
            return
        if len(frame) > MAX_QUEUED_BYTES:
            writer.transport_write(frame)
            return
        if not queued:
            self._at_turn_end(self.flush)
        queued[writer] = [frame]
        self._queued_bytes[writer] = len(frame)
        if len(queued) == MAX_BATCH:
            self.flush()

    def take_back(self, writer: Writer) -> None:
        """``writer`` is closing: what it queued goes to its transport now (which sends it
        before it closes), since its socket may be closed, and its number reused, before the
        turn ends."""
        queued = self._queued.pop(writer, None)
        self._queued_bytes.pop(writer, None)
        if queued is not None:
            writer.transport_write(b"".join(queued))

    def flush(self) -> None:
        """Send what is queued; what a socket did not take, or could not, goes to its
        transport, which buffers it or finds the error itself."""
        queued, self._queued = self._queued, {}
        self._queued_bytes = {}
        writers = [writer for writer in queued if writer.sendable()]  # the others are gone
        if not writers:
            return
        if len(writers) == 1:  # one send: the transport's write (class docstring)
            writers[0].transport_write(b"".join(queued[writers[0]]))
            return
        items = [(writer.fd, b"".join(queued[writer])) for writer in writers]
        results = [0] * len(items)
        if self._sender is not None:
            try:
                results = self._sender.send(items)
            except OSError as exc:  # the ring failed: the transports write, from now on
                log.warning("batched sends off: %s", exc)
                self._sender.close()
                self._sender = None
        for writer, (_, data), sent in zip(writers, items, results, strict=True):
            if sent < len(data):
                writer.transport_write(data[max(sent, 0) :])

    def close(self) -> None:
        self.flush()
        if self._sender is not None:
            self._sender.close()
            self._sender = None
