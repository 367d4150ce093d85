"""Hears of new work on a subscriptions/listen stream (MCP 2026-07-28) with the official MCP Python SDK.

Usage: listen.py <mcp_url> <agent_token> <process>. Subscribes to the agent's work of <process>,
prints "listening", then waits for one notifications/resources/updated, reads the resource and
prints "heard <runId>" for the first item it lists. Raises with what differed otherwise.
"""

import asyncio
import json
import sys
import warnings

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourceUpdated

warnings.simplefilter("ignore", DeprecationWarning)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


async def main(url, token, process):
    uri = f"agentprocess://work?process={process}"
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="auto") as client:
            version = client.session.protocol_version
            check(version == "2026-07-28", f"negotiated {version}")
            listed = [resource.uri for resource in (await client.list_resources()).resources]
            check("agentprocess://work" in listed, f"resources: {listed}")
            async with client.listen(resource_subscriptions=[uri]) as stream:
                honored = stream.honored.resource_subscriptions
                check(honored == [uri], f"honored: {honored}")
                print("listening", flush=True)
                event = await asyncio.wait_for(anext(stream), 30)
                check(isinstance(event, ResourceUpdated) and event.uri == uri, f"event: {event}")
                read = await client.read_resource(uri)
                page = json.loads(read.contents[0].text)
                items = page["items"]
                check(items, f"told of work, read none: {page}")
                check(all(item["process"] == process for item in items), f"items: {items}")
                print(f"heard {items[0]['runId']}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
