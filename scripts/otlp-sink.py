"""A sink for OTLP over HTTP: answers every POST 200 and counts what it took. For the telemetry
benchmark (scripts/bench-telemetry.sh), so that exporting traces costs the server what it would
against a real collector, not what a failing endpoint costs.

Usage: otlp-sink.py PORT     (prints requests and bytes taken when stopped with SIGTERM)
"""

import http.server
import signal
import sys

taken = {"requests": 0, "bytes": 0}


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        self.rfile.read(length)
        taken["requests"] += 1
        taken["bytes"] += length
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_):
        pass


def stop(*_):
    print(f"otlp sink: {taken['requests']} requests, {taken['bytes']} bytes", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, stop)
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
