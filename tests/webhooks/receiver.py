"""A real HTTP receiver on 127.0.0.1 for webhook tests: answers each POST with the next status
of its script (then 200) and records every request (headers, raw body)."""

import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


class Receiver:
    def __init__(self, *statuses: int):
        self.requests: list[dict] = []
        self.script: deque[int] = deque(statuses)
        self.lock = threading.Lock()
        self.httpd = _QuietServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server.lock:
                    server.requests.append({"headers": dict(self.headers), "body": body})
                    status = server.script.popleft() if server.script else 200
                reply = b'{"received": true}' if status < 300 else b"receiver trouble"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        return Handler
