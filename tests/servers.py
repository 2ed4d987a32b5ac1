"""Real servers on loopback for tests: an S3-compatible server and a fault-injecting proxy.

The S3 server is moto's standalone server; obstore's ``S3Store`` talks to it exactly as
to AWS (endpoint, credentials, region). :class:`FaultyProxy` sits in front of it to
simulate a flaky or dead server. Everything binds to 127.0.0.1 and stops by itself.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ACCESS_KEY = "testing-key"
SECRET_KEY = "testing-secret"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class S3Server:
    """moto's S3 server on a free loopback port."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def aws_environment(self) -> dict[str, str]:
        """The standard AWS variables users set, pointing at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def create_bucket(self, bucket: str) -> None:
        self.client().create_bucket(Bucket=bucket)

    def upload(self, bucket: str, key: str, path: Path | str) -> None:
        self.client().upload_file(str(path), bucket, key)

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=data)

    def store(self, bucket: str, *, endpoint: str | None = None, **options: Any) -> Any:
        """An obstore ``S3Store`` for ``bucket``, configured as for AWS plus the endpoint."""
        from obstore.store import S3Store

        client_options = {"allow_http": True, **options.pop("client_options", {})}
        return S3Store(
            bucket,
            endpoint=endpoint or self.endpoint,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            region=REGION,
            client_options=client_options,
            **options,
        )


class FaultyProxy:
    """HTTP proxy to ``upstream`` that can fail or stall requests.

    ``fail_next(n, status)`` answers the next ``n`` requests with ``status``;
    ``stall()`` makes every later request hang (until ``release()`` or stop).
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self._lock = threading.Lock()
        self._failures_left = 0
        self._failure_status = 503
        self._stalled = threading.Event()
        self._released = threading.Event()
        self.requests = 0
        #: The HTTP method of every request received, in order.
        self.methods: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                with proxy._lock:
                    proxy.requests += 1
                    proxy.methods.append(self.command)
                    failing = proxy._failures_left > 0
                    if failing:
                        proxy._failures_left -= 1
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if proxy._stalled.is_set():
                    # Hold the connection open without answering; bounded so the test
                    # process never leaks a thread forever.
                    proxy._released.wait(timeout=60)
                    return
                if failing:
                    payload = b"<Error><Code>SlowDown</Code></Error>"
                    self.send_response(proxy._failure_status)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                headers["Host"] = f"127.0.0.1:{proxy.upstream_port}"
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in {"transfer-encoding", "content-length", "connection"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                upstream.close()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, count: int, status: int = 503) -> None:
        with self._lock:
            self._failures_left = count
            self._failure_status = status

    def stall(self) -> None:
        self._stalled.set()

    def release(self) -> None:
        self._released.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def running_s3() -> Iterator[S3Server]:
    server = S3Server()
    server.start()
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def faulty_proxy(upstream: S3Server) -> Iterator[FaultyProxy]:
    proxy = FaultyProxy(upstream.port)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
