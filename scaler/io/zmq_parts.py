"""A multipart message sent or received part by part, with plain-int flags: the one home of how our sockets frame
messages outside pyzmq's `send_multipart` / `recv_multipart`, which cost a Python call per part more (a flag enum's
`|` per part sent, a RCVMORE option read per part received). Used by the asyncio sockets (`zmq_async`) and by a
processor's blocking link to the scheduler (`worker/processor/outlet.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import zmq

Frames = list[Any]  #: bytes, or zmq.Frame when received with copy=False

#: As plain ints: a flag enum's `&` costs a Python call per message.
EVENTS, POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)
_MORE, _LAST = int(zmq.SNDMORE | zmq.NOBLOCK), int(zmq.NOBLOCK)
_MORE_BLOCKING, _LAST_BLOCKING = int(zmq.SNDMORE), 0


#: The most bytes `joined` copies into one part: larger batches go part by part (a copy of megabytes costs more than
#: ZeroMQ's cost per part saves)
JOIN_LIMIT_BYTES = 64 * 1024


def joined(frames: list[Any]) -> list[Any]:
    """Several encoded messages for one peer as one part, back to back (the receiver splits them again:
    `scaler.protocol.codec.split`), when they are small: ZeroMQ's cost per part (a Python call to send it and one to
    receive it, a message object each side) and CURVE's (a box per part, sealed and opened) are paid once for the
    batch instead of once per message. Otherwise the frames as they are."""
    if len(frames) < 2:
        return frames
    total = 0
    for frame in frames:
        if type(frame) is not bytes:
            return frames
        total += len(frame)
    return [b"".join(frames)] if total <= JOIN_LIMIT_BYTES else frames


def send_parts(sock: Any, frames: Sequence[Any], copy: bool = True, block: bool = False) -> None:
    """`sock.send_multipart(frames, zmq.NOBLOCK, copy=copy)` (`block`: without NOBLOCK) without its cost per part:
    pyzmq's adds `zmq.SNDMORE` to the flags of each part but the last, an operation on a flag enum, a Python call of
    about 1 us (a 9-part message, 11 -> 3.5 us). A part that is not bytes or a Frame, or a socket that is not ZeroMQ's
    (the tests' in-memory network), goes through `send_multipart`, which checks each part before it sends any."""
    if type(sock) is not zmq.Socket or not all(type(frame) is bytes or type(frame) is zmq.Frame for frame in frames):
        sock.send_multipart(frames, 0 if block else zmq.NOBLOCK, copy=copy)
        return
    more, last_flags = (_MORE_BLOCKING, _LAST_BLOCKING) if block else (_MORE, _LAST)
    send, last = sock.send, len(frames) - 1
    for index in range(last):
        send(frames[index], more, copy=copy)
    send(frames[last], last_flags, copy=copy)


def receive_parts(sock: zmq.Socket[Any], copy: bool = True) -> Frames:
    """One multipart message, without waiting (zmq.Again when none waits): its parts as bytes when `copy`, else as
    frames. Each part's `more` says whether another follows: pyzmq's `recv_multipart` asks the socket's RCVMORE option
    after each part instead, about 0.7 us a time."""
    frame = sock.recv(zmq.NOBLOCK, copy=False)
    frames = [frame]
    while frame.more:
        frame = sock.recv(zmq.NOBLOCK, copy=False)  # the parts of a message arrive together: never zmq.Again here
        frames.append(frame)
    return [part.bytes for part in frames] if copy else frames
