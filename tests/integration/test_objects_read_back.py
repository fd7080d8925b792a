"""Every object reads back, whatever happened to it (issue 38, goal 1): a property over real processes.

One stack for the module: an object storage server with a budget of 4 MiB and a spill directory, a scheduler using
it (`-osa`), one worker, a client with the default serializer and one with a custom serializer. For every (how the
object was made, its life in the store) pair, hypothesis draws the rest:

- kind: raw `bytes` (from 1 MiB, `send_object` stores them as a marker frame and the bytes), a pickled value (a
  dict), a numpy array, a pandas frame, bytes through a custom serializer (a tag byte, then zlib);
- size: inline (up to 16 KiB: arguments and results travel inside the messages), stored (100 KiB to 1.5 MiB), over
  the hashing threshold (`LARGE_OBJECT_BYTES`, 8 MiB, also over the budget: spilled as soon as written);
- made by: `send_object`, a task's argument, a task's result, a nested task's result;
- life: left in memory, spilled (5 MiB of other objects put after it), spilled and read back into memory (a get),
  after a storage restart (SIGTERM or SIGKILL; the new server rescans the spill directory), after others were
  evicted around it (asked for between two batches of other objects, so that the first batch leaves memory before
  it), deleted;
- reader: a task (a reference argument, the argument itself, a graph node's dependency, the nested task's parent),
  or the client (`future.result()`; a sent object through `read_stored`, what `ray.get` on a `ray.put` reference does).

Every read gives the value that was written (compared by a fingerprint of its bytes, dtype and shape), or, for a
deleted object, `MissingObjects` naming the object. What happens to the object is done between its making and its
read: the reading task waits behind a gate task in a graph, or the nested parent waits for a gate file.

Checked on main's code (spill files without their frame lengths; run with this file, 24 tests): the five
`send_object` tests whose object is read fail with `DeserializeObjectError ... UnpicklingError("invalid load key,
'\\x00'.")`, issue 38's finding, on the first example (raw `bytes` over the hashing threshold, hence over the budget:
spilled as soon as written, even when "left in memory"); the others pass there (arguments and results are one frame).
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import enum
import hashlib
import itertools
import os
import pickle
import random
import signal
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from scaler import Client
from scaler.compat.ray_session import read_stored
from scaler.errors import MissingObjects
from scaler.io.address import free_tcp_port_block
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.payload.processor_context import BlockingWait
from scaler.payload.serializer import Serializer, serialize_to_frames
from scaler.payload.storage import INLINE_LIMIT_BYTES
from scaler.payload.task_encoder import LARGE_OBJECT_BYTES
from scaler.protocol import messages as m
from tests.integration.conftest import (
    COLD_START_SECONDS,
    Addresses,
    Launcher,
    ProcessWatch,
    Service,
    session_security,
    wait_for,
    wait_for_workers,
)

#: One process runs the whole module, one test after the other: the longest-first order would otherwise interleave its
#: tests with other modules' and start the stack again each time it comes back to them.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("objects_read_back")]

KiB = 1024
MiB = 1024 * KiB
BUDGET = "4MiB"
FILLER_BYTES = 5 * MiB  #: more than the budget: everything put before it leaves memory
TIMEOUT = 60.0


class Kind(enum.Enum):
    RAW_BYTES = "raw bytes"
    PICKLED = "pickled"
    NUMPY = "numpy"
    PANDAS = "pandas"
    CUSTOM = "custom serializer"


class Making(enum.Enum):
    SEND_OBJECT = "send_object"
    ARGUMENT = "argument"
    RESULT = "result"
    NESTED_RESULT = "nested result"


class Life(enum.Enum):
    IN_MEMORY = "in memory"
    SPILLED = "spilled"
    READ_BACK = "read back"
    RESTARTED = "restarted"
    OTHERS_EVICTED = "others evicted"
    DELETED = "deleted"


class Reader(enum.Enum):
    TASK = "task"
    CLIENT = "client"


READERS = {
    Making.SEND_OBJECT: [Reader.TASK, Reader.CLIENT],
    Making.ARGUMENT: [Reader.TASK],
    Making.RESULT: [Reader.CLIENT, Reader.TASK],
    Making.NESTED_RESULT: [Reader.TASK],
}
SIZES = {
    "inline": (1, 16 * KiB),
    "stored": (100 * KiB, 1536 * KiB),
    "hashed": (LARGE_OBJECT_BYTES, LARGE_OBJECT_BYTES + 64 * KiB),
}


class TaggedSerializer(Serializer):
    """A custom serializer: a tag byte, then zlib-compressed pickle (nothing the default one could read)."""

    @staticmethod
    def serialize(obj: Any) -> bytes:
        return b"T" + zlib.compress(pickle.dumps(obj, protocol=5), 1)

    @staticmethod
    def deserialize(payload: bytes) -> Any:
        if payload[:1] != b"T":
            raise ValueError(f"not a tagged payload: it starts with {bytes(payload[:8])!r}")
        return pickle.loads(zlib.decompress(payload[1:]))


# ---------------------------------------------------------------- what runs on the worker too


def make_value(kind: str, size: int, seed: int) -> Any:
    """A value of about `size` bytes once serialized, different for every seed."""
    rng = random.Random(seed)
    if kind in (Kind.RAW_BYTES.value, Kind.CUSTOM.value):
        return rng.randbytes(size)
    if kind == Kind.PICKLED.value:
        return {"seed": seed, "text": base64.b64encode(rng.randbytes(max(1, size * 3 // 4))).decode()}
    import numpy

    generator = numpy.random.default_rng(seed)
    if kind == Kind.NUMPY.value:
        return generator.random(max(1, size // 8))
    import pandas

    rows = max(1, size // 16)
    return pandas.DataFrame({"a": generator.integers(0, 1 << 60, rows), "b": generator.random(rows)})


def fingerprint(value: Any) -> str:
    """The value's type, and its bytes with their dtype and shape (numpy, pandas) or its items (a dict)."""
    digest = hashlib.sha256(f"{type(value).__module__}.{type(value).__qualname__}".encode())
    if type(value).__name__ == "ndarray":
        digest.update(f"{value.dtype}{value.shape}".encode())
        digest.update(value.tobytes())
    elif type(value).__name__ == "DataFrame":
        for column in value.columns:
            digest.update(f"{column}:{value[column].dtype}:{len(value)}".encode())
            digest.update(value[column].to_numpy().tobytes())
    elif isinstance(value, bytes):
        digest.update(value)
    else:
        digest.update(repr(sorted(value.items())).encode())
    return digest.hexdigest()


def read_fingerprint(value: Any, *_after: Any) -> str:
    return fingerprint(value)


def wait_for_file(path: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared: the test did not open the gate")
        time.sleep(0.02)


def nested_parent(kind: str, size: int, seed: int, made_path: str, gate_path: str) -> str:
    """Makes its value as a nested task's result, names where it is stored, waits for the gate, then reads it."""
    serializer = TaggedSerializer() if kind == Kind.CUSTOM.value else None
    with Client(serializer=serializer) if serializer is not None else Client() as client:
        child = client.submit(make_value, kind, size, seed)
        with BlockingWait():  # this task parks while it waits: its child runs on the same single worker
            concurrent.futures.wait([child], timeout=TIMEOUT)
        object_id = stored_object_id(child)
        Path(made_path + ".tmp").write_text(object_id.hex() if object_id is not None else "")
        os.replace(made_path + ".tmp", made_path)
        wait_for_file(gate_path)
        return fingerprint(child.result())


def stored_object_id(future: Any) -> bytes | None:
    """Where a finished task's result is stored (None: it travelled inline). No public API names it; the test needs it
    to act on the object before anyone reads it."""
    raw: m.TaskResult = future._raw
    return bytes(raw.payload) if raw.payload_kind is m.PayloadKind.OBJECT_ID else None


def stored_argument_id(client: Client, value: Any) -> bytes | None:
    """Where the client stores `value` as a task's argument (None: it travels inline). The id is the content's digest,
    or, from LARGE_OBJECT_BYTES, a random id the client finds by that digest (`TaskEncoder.stored_id`). The
    content is the value's frames (`serialize_to_frames`: a numpy array's buffers out of band), one frame as itself."""
    frames = serialize_to_frames(client._session.serializer, value)
    if sum(memoryview(frame).nbytes for frame in frames) <= INLINE_LIMIT_BYTES:
        return None
    return client._session._encoder.stored_id(frames if len(frames) > 1 else frames[0])


# ---------------------------------------------------------------- the stack


@dataclass
class Stack:
    launcher: Launcher
    addresses: Addresses
    spill: Path
    gates: Path
    storage: Service
    client: Client
    custom_client: Client
    connection: ObjectStorageConnection  #: the servers' keys: it acts on any object

    def start_storage(self) -> None:
        self.storage = self.launcher.object_storage(
            self.addresses.object_storage, "--max-memory", BUDGET, "--spill-directory", str(self.spill)
        )
        self.storage.wait_for_log("listening on", COLD_START_SECONDS)

    def restart_storage(self, signum: int) -> None:
        self.storage.popen.send_signal(signum)
        self.storage.wait_exit()
        self.start_storage()

    def fill(self) -> None:
        """Put more than the budget of other objects, then delete them: whatever was in memory before leaves it."""
        names = [f"filler-{time.monotonic_ns()}-{index}".encode() for index in range(FILLER_BYTES // MiB)]
        for name in names:
            self.connection.put(name, os.urandom(MiB))
        assert self.connection.delete(names) == len(names)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("read-back")
    watch = ProcessWatch()
    launcher = Launcher(watch, root)
    base = free_tcp_port_block(3)
    addresses = Addresses(f"tcp://127.0.0.1:{base}", f"tcp://127.0.0.1:{base + 1}", f"tcp://127.0.0.1:{base + 2}")
    (root / "gates").mkdir()
    try:
        storage = launcher.object_storage(
            addresses.object_storage, "--max-memory", BUDGET, "--spill-directory", str(root / "spill")
        )
        storage.wait_for_log("listening on", COLD_START_SECONDS)
        launcher.scheduler(addresses)
        launcher.cluster(addresses.scheduler, 1, "-his", "0.5")
        wait_for_workers(addresses.monitor, 1, COLD_START_SECONDS)
        watch.remember()
        security = session_security("server")
        with contextlib.ExitStack() as stack:
            client = stack.enter_context(Client(address=addresses.scheduler))
            custom = stack.enter_context(Client(address=addresses.scheduler, serializer=TaggedSerializer()))
            connection = stack.enter_context(
                ObjectStorageConnection(
                    addresses.object_storage, "scheduler", timeout_seconds=TIMEOUT, security=security
                )
            )
            yield Stack(launcher, addresses, root / "spill", root / "gates", storage, client, custom, connection)
    finally:
        watch.stop_all()
        leftovers = watch.leftovers()
        assert not leftovers, f"processes left behind: {leftovers}"


# ---------------------------------------------------------------- one object's story

_serial = itertools.count(1)


@dataclass
class Case:
    kind: Kind
    size: int
    seed: int
    making: Making
    life: Life
    reader: Reader
    signum: int  #: how the storage is stopped when the life is a restart

    def __str__(self) -> str:
        made = "sent with send_object" if self.making is Making.SEND_OBJECT else f"made as a task's {self.making.value}"
        kind, life, reader = self.kind.value, self.life.value, self.reader.value
        return f"a {kind} object of {self.size:,} bytes {made}, {life}, read by the {reader}"


class Story:
    """One case carried out: the object made, its life lived, then read."""

    def __init__(self, stack: Stack, case: Case) -> None:
        self.stack, self.case = stack, case
        self.client = stack.custom_client if case.kind is Kind.CUSTOM else stack.client
        self.value = make_value(case.kind.value, case.size, case.seed)
        serial = next(_serial)
        self.gate = str(stack.gates / f"gate-{serial}")
        self.made = str(stack.gates / f"made-{serial}")

    def run(self) -> tuple[bytes | None, Any]:
        """(the stored object's id, or None when it travelled inline; a callable that reads it back)."""
        making = self.case.making
        if making is Making.SEND_OBJECT:
            reference = self.client.send_object(self.value)
            self.live(reference.object_id)
            if self.case.reader is Reader.CLIENT:
                return reference.object_id, lambda: fingerprint(read_stored(self.client, reference))
            return reference.object_id, lambda: self.client.submit(read_fingerprint, reference).result(TIMEOUT)
        if making is Making.ARGUMENT:
            graph = {"gate": (wait_for_file, self.gate), "read": (read_fingerprint, self.value, "gate")}
            futures = self.client.get(graph, keys=["read"], block=False)
            object_id = stored_argument_id(self.client, self.value)
            if object_id is not None:  # the client's put is pipelined: `get(block=False)` returns before it is stored
                connection = self.stack.connection
                wait_for(lambda: connection.exists(object_id), "the argument in object storage", TIMEOUT)
            self.live(object_id)
            Path(self.gate).touch()
            return object_id, lambda: futures["read"].result(TIMEOUT)
        if making is Making.RESULT:
            arguments = (self.case.kind.value, self.case.size, self.case.seed)
            if self.case.reader is Reader.CLIENT:
                future = self.client.submit(make_value, *arguments)
                concurrent.futures.wait([future], timeout=TIMEOUT)
                object_id = stored_object_id(future)
                self.live(object_id)
                return object_id, lambda: fingerprint(future.result(TIMEOUT))
            graph = {
                "make": (make_value, *arguments),
                "gate": (wait_for_file, self.gate),
                "read": (read_fingerprint, "make", "gate"),
            }
            futures = self.client.get(graph, keys=["make", "read"], block=False)
            concurrent.futures.wait([futures["make"]], timeout=TIMEOUT)
            object_id = stored_object_id(futures["make"])
            self.live(object_id)
            Path(self.gate).touch()
            return object_id, lambda: futures["read"].result(TIMEOUT)
        parent = self.client.submit(
            nested_parent, self.case.kind.value, self.case.size, self.case.seed, self.made, self.gate
        )
        wait_for(lambda: os.path.exists(self.made) or parent.done(), "the nested task's result", TIMEOUT)
        if parent.done():
            parent.result()  # it failed before: say how
        written = Path(self.made).read_text()
        object_id = bytes.fromhex(written) if written else None
        self.live(object_id)
        Path(self.gate).touch()
        return object_id, lambda: parent.result(TIMEOUT)

    def live(self, object_id: bytes | None) -> None:
        stack, life = self.stack, self.case.life
        if life is Life.SPILLED:
            stack.fill()
        elif life is Life.READ_BACK:
            stack.fill()
            if object_id is not None:
                stack.connection.get(object_id)  # back into memory, the most recently used
        elif life is Life.RESTARTED:
            stack.restart_storage(self.case.signum)
        elif life is Life.OTHERS_EVICTED:
            others = [f"other-{time.monotonic_ns()}-{index}".encode() for index in range(2)]
            stack.connection.put(others[0], os.urandom(2 * MiB))
            if object_id is not None:
                assert stack.connection.exists(object_id)  # more recently used than the first other
            stack.connection.put(others[1], os.urandom(3 * MiB))  # the first other leaves memory
            assert stack.connection.delete(others) == 2
        elif life is Life.DELETED and object_id is not None:
            assert stack.connection.delete([object_id]) == 1


cases = st.builds(
    lambda kind, size_class, fraction, seed, reader_index, killed: (
        kind,
        size_class,
        fraction,
        seed,
        reader_index,
        killed,
    ),
    st.sampled_from(Kind),
    st.sampled_from(sorted(SIZES)),
    st.floats(0, 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 1),
    st.booleans(),
)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("life", list(Life), ids=[life.value.replace(" ", "-") for life in Life])
@pytest.mark.parametrize("making", list(Making), ids=[making.value.replace(" ", "-") for making in Making])
@settings(
    max_examples=3,
    deadline=None,
    database=None,
    # no shrinking: each example costs real processes, and a failing one is printed as it was drawn
    phases=[Phase.explicit, Phase.generate],
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=cases)
# besides the first example hypothesis draws, the simplest (raw bytes over the hashing threshold, read by a task):
# raw bytes with their marker frame, under the hashing threshold, read by the client where the client can read it
@example(drawn=(Kind.RAW_BYTES, "stored", 0.9, 1, 1, True))
def test_every_object_reads_back(stack: Stack, making: Making, life: Life, drawn: tuple[Any, ...]) -> None:
    kind, size_class, fraction, seed, reader_index, killed = drawn
    low, high = SIZES[size_class]
    readers = READERS[making]
    case = Case(
        kind,
        low + int((high - low) * fraction),
        seed * 1_000_003 + next(_serial),  # never the same content twice: stored ids are content digests
        making,
        life,
        readers[reader_index % len(readers)],
        signal.SIGKILL if killed else signal.SIGTERM,
    )
    story = Story(stack, case)
    object_id, read = story.run()
    if life is Life.DELETED and object_id is not None:
        with pytest.raises(MissingObjects) as missing:
            read()
        assert object_id.hex() in str(missing.value), f"{case}: the error does not name the object: {missing.value}"
        return
    try:
        got = read()
    except Exception as error:
        raise AssertionError(f"{case} (object {object_id.hex() if object_id else 'inline'}): {error!r}") from error
    assert got == fingerprint(story.value), f"{case}: read back something else"
