#!/usr/bin/env python3
"""Latency of read tools over MCP: python3 scripts/read-latency.py URL TOKEN [CALLS] [TOOL ARGS_JSON]...

Calls each TOOL (with its JSON arguments) CALLS times in a row (default 200) over one keep-alive
connection, as JSON-RPC tools/call POSTs to URL/mcp, and prints p50, p99 and max in milliseconds.
Without TOOL arguments it measures `get_work {}` and `list_runs {}`. Python 3 standard library
only. Every answer must be a tool result with ok: true, or the script stops.
"""
import http.client
import json
import sys
import time
import urllib.parse


def percentile(sorted_values, fraction):
    """The value at `fraction` of the sorted values (nearest rank)."""
    index = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def call(connection, path, token, tool, arguments):
    body = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    })
    connection.request("POST", path, body=body, headers={
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
        "Authorization": f"Bearer {token}",
    })
    response = connection.getresponse()
    answer = response.read()
    if response.status != 200:
        sys.exit(f"{tool}: HTTP {response.status}: {answer[:200]!r}")
    envelope = json.loads(answer)["result"]["structuredContent"]
    if not envelope.get("ok"):
        sys.exit(f"{tool} refused: {envelope.get('error')}")
    return envelope["data"]


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    url, token = argv[1], argv[2]
    calls = int(argv[3]) if len(argv) > 3 else 200
    pairs = argv[4:] or ["get_work", "{}", "list_runs", "{}"]
    if len(pairs) % 2:
        sys.exit("each TOOL needs its ARGS_JSON")
    parsed = urllib.parse.urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port or 80, timeout=30)
    path = parsed.path.rstrip("/") + "/mcp"
    for tool, arguments in zip(pairs[::2], pairs[1::2]):
        arguments = json.loads(arguments)
        call(connection, path, token, tool, arguments)  # warm the connection and caches
        samples = []
        items = 0
        for _ in range(calls):
            started = time.perf_counter()
            data = call(connection, path, token, tool, arguments)
            samples.append((time.perf_counter() - started) * 1000)
            items = len(data.get("items", []))
        samples.sort()
        print(f"{tool} {json.dumps(arguments)}: {calls} calls, {items} items each, "
              f"p50 {percentile(samples, 0.50):.2f} ms, p99 {percentile(samples, 0.99):.2f} ms, "
              f"max {samples[-1]:.2f} ms")


if __name__ == "__main__":
    main(sys.argv)
