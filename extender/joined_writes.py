"""One write to the socket per reply, not two.

uvicorn writes a response's head (status line and headers) and its body with a transport write
each. On a kept-alive connection to kube-scheduler that is two send system calls per verb, two
TCP segments, and two wake-ups of the scheduler's reader, for every filter, prioritize and bind:
on a small machine shared with the scheduler and the API server, the send calls were the largest
single cost of the extender's event loop under a scheduling storm. :class:`JoinedWrites` holds a
write back until the next one, which it joins (the head goes out with the body), or until the
loop's next turn, so that nothing written is ever kept waiting for more than that turn; the bytes
and their order are unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any


class JoinedWrites:
    """``transport`` with each write held back and sent joined to the next one, or on the loop's
    next turn if none comes; closing sends what is held first, aborting drops it. Everything else
    is the transport's own."""

    __slots__ = ("_due", "_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._due = False  # a send of what is held is scheduled on the loop

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            if not self._due:
                self._due = True
                self._loop.call_soon(self._send_held)
            return
        self._held = None
        self._transport.write(held + data)

    def _send_held(self) -> None:
        self._due = False
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(lines))

    def write_eof(self) -> None:
        self._send_held()
        self._transport.write_eof()

    def close(self) -> None:
        self._send_held()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
