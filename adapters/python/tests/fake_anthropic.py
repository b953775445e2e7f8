"""A scripted model behind a fake Anthropic Messages API on 127.0.0.1, for
running Claude Code's real agent loop (the CLI the Claude Agent SDK bundles)
without a paid service: ``ANTHROPIC_BASE_URL`` points the CLI here. Each
``POST /v1/messages`` is answered by ``respond(request_body)``, which returns
the assistant's content blocks (text and tool_use) and stop reason; replies
are streamed as server-sent events when the request asks for a stream."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], tuple[list[dict[str, Any]], str]]


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def _stream_events(
    message: dict[str, Any], blocks: list[dict[str, Any]], stop: str
) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": message})]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


@contextmanager
def fake_messages_api(respond: Responder) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serves the Messages API on a free loopback port; yields its base URL
    and the list of request bodies it received."""
    requests: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, ctype: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(404, "application/json", b'{"type":"error","error":{"type":"not_found_error","message":"no"}}')

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            if self.path.split("?")[0].endswith("/count_tokens"):
                self._send(200, "application/json", b'{"input_tokens": 10}')
                return
            with lock:
                requests.append(body)
                n = len(requests)
            blocks, stop = respond(body)
            message = {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "scripted"),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            }
            if body.get("stream"):
                self._send(200, "text/event-stream", _sse(_stream_events(message, blocks, stop)))
            else:
                message.update(content=blocks, stop_reason=stop)
                self._send(200, "application/json", json.dumps(message).encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
