"""A reply leaves the extender in one write to its socket: the response's head joined to its body
(berth.extender.joined_writes), with the bytes and their order unchanged."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
import uvicorn
from uvicorn.server import ServerState

from berth.extender.joined_writes import JoinedWrites
from berth.extender.limits import guarded_protocol
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import args, bind_args, harness


class RecordingTransport(asyncio.Transport):
    """A transport that records what is done to it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, bytes]] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.calls.append(("write", bytes(data)))

    def close(self) -> None:
        self.calls.append(("close", b""))
        self.closing = True

    def abort(self) -> None:
        self.calls.append(("abort", b""))
        self.closing = True

    def write_eof(self) -> None:
        self.calls.append(("write_eof", b""))

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8888)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def held(steps: list[tuple[str, bytes]]) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
    """What the transport saw right after ``steps``, and after the loop's next turn."""

    async def run() -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
        transport = RecordingTransport()
        joined = JoinedWrites(transport, asyncio.get_running_loop())
        for step, data in steps:
            getattr(joined, step)(*((data,) if step == "write" else ()))
        at_once = list(transport.calls)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return at_once, transport.calls

    return asyncio.run(run())


JOINED = [
    # (name, steps, what the transport saw at once, and after the loop's next turn)
    ("a head and its body: one write", [("write", b"head"), ("write", b"body")],
     [("write", b"headbody")], [("write", b"headbody")]),
    ("a lone write: sent on the loop's next turn", [("write", b"head")], [], [("write", b"head")]),
    ("three writes: the first two joined, the third on the next turn",
     [("write", b"a"), ("write", b"b"), ("write", b"c")], [("write", b"ab")], [("write", b"ab"), ("write", b"c")]),
    ("closing sends what is held first", [("write", b"head"), ("close", b"")],
     [("write", b"head"), ("close", b"")], [("write", b"head"), ("close", b"")]),
    ("the end of the stream sends what is held first", [("write", b"head"), ("write_eof", b"")],
     [("write", b"head"), ("write_eof", b"")], [("write", b"head"), ("write_eof", b"")]),
    ("aborting drops what is held", [("write", b"head"), ("abort", b"")], [("abort", b"")], [("abort", b"")]),
]


@pytest.mark.parametrize(("name", "steps", "at_once", "after"), JOINED, ids=[c[0] for c in JOINED])
def test_writes_are_joined_and_never_kept_past_the_loops_next_turn(
        name: str, steps: list[tuple[str, bytes]], at_once: list[tuple[str, bytes]],
        after: list[tuple[str, bytes]]) -> None:
    assert held(steps) == (at_once, after)


def test_the_held_bytes_count_in_the_write_buffer() -> None:
    async def run() -> int:
        joined = JoinedWrites(RecordingTransport(), asyncio.get_running_loop())
        joined.write(b"12345")
        return joined.get_write_buffer_size()

    assert asyncio.run(run()) == 5


@pytest.mark.parametrize("verb", ["filter", "prioritize", "bind"])
def test_a_verbs_reply_leaves_in_one_write(verb: str) -> None:
    """The served protocol (berth's guarded httptools protocol) answers a verb with one write of
    its head and body together, on a kept-alive connection."""
    h = harness([make_node("a").cpu("4").obj(), make_node("b").cpu("4").obj(),
                 make_policy("web").strategy("Spread").obj()])
    pod = make_pod("web-0").labels({"app": "web"}).cpu("1").obj()
    body = orjson.dumps(bind_args(pod, "a") if verb == "bind" else args(pod, ["a", "b"]))
    app = h.app
    request = (f"POST /{verb} HTTP/1.1\r\nhost: berth\r\ncontent-type: application/json\r\n"
               f"content-length: {len(body)}\r\n\r\n").encode() + body

    async def run() -> list[tuple[str, bytes]]:
        protocol_class = guarded_protocol(header_timeout=5, max_header_bytes=16384)
        config = uvicorn.Config(app, http=protocol_class, lifespan="off", log_level="warning")
        config.load()
        transport = RecordingTransport()
        protocol = protocol_class(config=config, server_state=ServerState(), app_state={})
        protocol.connection_made(transport)
        protocol.data_received(request)
        for _ in range(200):
            await asyncio.sleep(0.005)
            if transport.calls:
                await asyncio.sleep(0.005)
                break
        protocol.connection_lost(None)
        return transport.calls

    writes = [data for step, data in asyncio.run(run()) if step == "write"]
    assert len(writes) == 1, writes
    head, _, reply = writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert f"content-length: {len(reply)}".encode() in head
    assert "Error" in orjson.loads(reply) or isinstance(orjson.loads(reply), list)
