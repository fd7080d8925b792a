"""The browser client's object storage connection: the object storage client's pure core (`object_storage.client_core`)
over a DEALER link, its requests waited for by running the loop (`waiting.py`). What the task encoder stores through
(functions, arguments over 64 KiB, `send_object`) and what results over 64 KiB are read from."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from scaler.browser.links import DealerLink
from scaler.browser.waiting import Waiting
from scaler.errors import ObjectStorageException
from scaler.object_storage.client_core import (
    Answered,
    Failed,
    Outcome,
    StorageClientCore,
    frames_or_pieces,
    hello_operation,
    payload_frames,
    put_operation,
    reply_value,
)
from scaler.protocol.codec import DecodeError, decode_storage_reply, encode_storage_request
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import Delete, DeleteOwner, Get, ObjectSize, StorageOperation
from scaler.protocol.zmtp_curve import CurveKeys


class BrowserStorage:
    """Lock-step requests, one at a time (the browser runs one thread). Raises ObjectStorageException when the server
    does not answer in time or the connection is lost."""

    def __init__(
        self, address: str, owner_id: bytes, waiting: Waiting, timeout_seconds: float, keys: CurveKeys | None = None
    ) -> None:
        self.address = address
        self._keys = keys
        self._owner_id = owner_id
        self._waiting = waiting
        self._core: StorageClientCore[None] = StorageClientCore(
            address, hello_operation("client", local_python_version(), owner_id), timeout_seconds
        )
        self._answers: dict[int, Answered | Failed] = {}
        self._changed = asyncio.Event()
        self._link: DealerLink | None = None
        self._lost: str | None = None

    # ------------------------------------------------------------ what the client and its results use

    def put(self, object_id: ObjectID, payload: Any, name: str) -> None:
        frames = payload_frames(payload)
        self._call(put_operation(object_id, frames, self._owner_id, name), frames)

    def get_frames(self, object_id: bytes, copy_on_write: bool = False, pieces: bool = False) -> list[memoryview]:
        """As `ObjectStorageConnection.get_frames` off the server's host: the frames received."""
        answer = self._call(Get(ObjectID(bytes(object_id))))
        total = reply_value(answer.reply, ObjectSize, self.address).total_bytes
        if sum(len(view) for view in answer.frames) != total:
            raise ObjectStorageException(f"object storage at {self.address} sent a truncated object")
        return list(frames_or_pieces(answer.reply, answer.frames, self.address))

    def maps_objects(self) -> bool:
        return False

    def delete(self, object_ids: Iterable[bytes]) -> int:
        ids = tuple(ObjectID(bytes(object_id)) for object_id in object_ids)
        return reply_value(self._call(Delete(ids)).reply, int, self.address) if ids else 0

    def delete_owner(self) -> int:
        """Delete every object this client stored."""
        return reply_value(self._call(DeleteOwner(bytes(self._owner_id))).reply, int, self.address)

    def close(self) -> None:
        self._core.on_closed()
        if self._link is not None:
            self._link.close()

    # ------------------------------------------------------------ the requests

    def _call(self, operation: StorageOperation, payload: Any = ()) -> Answered:
        if self._lost is not None:
            raise ObjectStorageException(self._lost)
        ticket = self._core.request(operation, payload, now=time.monotonic())
        self._waiting.run(self._answer(ticket))
        answer = self._answers.pop(ticket)
        if isinstance(answer, Failed):
            raise answer.error
        return answer

    async def _answer(self, ticket: int) -> None:
        if self._link is None:
            self._link = DealerLink(self.address, self._owner_id, self._on_message, self._on_lost, self._keys)
            await self._link.open()
        self._flush()
        while ticket not in self._answers:
            self._changed.clear()
            deadline = self._core.next_deadline()
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                self._carry_out(self._core.on_tick(time.monotonic()))

    def _flush(self) -> None:
        if self._link is None:
            return
        for request, payload in self._core.take_outgoing():
            self._link.send([encode_storage_request(request), *(bytes(frame) for frame in payload)])

    def _on_message(self, frames: list[bytes]) -> None:
        try:
            reply = decode_storage_reply(frames[0])
        except DecodeError as error:
            self._carry_out(self._core.on_bad_reply(str(error)))
            return
        self._carry_out(self._core.on_reply(reply, [memoryview(frame) for frame in frames[1:]], now=time.monotonic()))
        self._flush()  # a hello and a request sent again (a restarted server)

    def _on_lost(self, reason: str) -> None:
        self._lost = f"the connection to object storage at {self.address} is lost: {reason}"
        self._carry_out(self._core.on_send_failed(self._lost))

    def _carry_out(self, outcomes: list[Outcome[None]]) -> None:
        for outcome in outcomes:
            if isinstance(outcome, (Answered, Failed)):
                self._answers[outcome.ticket] = outcome
        self._changed.set()
