"""A real HTTP server on 127.0.0.1 speaking the chat-completions protocol, for LLM tests.

Behaviour is chosen per request by a marker in the last user message, or by a script of
behaviours consumed in order (then "ok"):
  ok · slow:<seconds> · 429:<retry-after> · 500 · malformed · drop · text:<reply> ·
  redirect:<location> (a 307)
Every request is recorded (path, body) for assertions.
"""

import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARKER = re.compile(r"\[\[(.+?)\]\]")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that time out or drop the connection are expected here


class ChatServer:
    def __init__(self, reply=None):
        self.requests: list[dict] = []
        self.script: deque[str] = deque()
        self.reply = reply or (lambda body: f"reply from {body.get('model')}")
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.httpd = _QuietServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def behaviour_for(self, body: dict) -> str:
        with self.lock:
            if self.script:
                return self.script.popleft()
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        found = MARKER.search(users[-1]["content"]) if users else None
        return found.group(1) if found else "ok"

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, payload: bytes, headers: dict | None = None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "body": body})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._respond(body, server.behaviour_for(body))
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _respond(self, body: dict, behaviour: str):
                name, _, arg = behaviour.partition(":")
                if name == "slow":
                    time.sleep(float(arg or 1))
                elif name == "429":
                    error = {"error": {"message": "rate limited", "type": "rate_limit"}}
                    return self._send(429, json.dumps(error).encode(), {"Retry-After": arg or "1"})
                elif name == "500":
                    error = {"error": {"message": "internal error", "type": "server_error"}}
                    return self._send(500, json.dumps(error).encode())
                elif name == "400":
                    error = {"error": {"message": "bad request", "type": "invalid_request"}}
                    return self._send(400, json.dumps(error).encode())
                elif name == "redirect":
                    return self._send(307, b"{}", {"Location": arg})
                elif name == "malformed":
                    return self._send(200, b'{"id": "x", "choices": [ {"message": ')
                elif name == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return None
                text = arg if name == "text" else server.reply(body)
                prompt_tokens = sum(
                    len(str(m.get("content", "")).split()) for m in body["messages"]
                )
                payload = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", ""),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": len(text.split()),
                        "total_tokens": prompt_tokens + len(text.split()),
                    },
                }
                return self._send(200, json.dumps(payload, ensure_ascii=False).encode())

        return Handler
