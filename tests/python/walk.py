"""Walks our purchase-request example through agentprocess serve with the official MCP Python SDK.

Usage: walk.py <mcp_url> <agent_token> <person_token>. Exits 0 when every step behaved as the
protocol says; otherwise raises with what differed.
"""

import asyncio
import contextlib
import json
import sys
import uuid
import warnings

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

warnings.simplefilter("ignore", DeprecationWarning)


def envelope(result):
    """The tool's { ok, ... } envelope: the text block and the structured content must agree."""
    text = json.loads(result.content[0].text)
    if result.structured_content is not None and result.structured_content != text:
        raise AssertionError(f"structured content {result.structured_content} != text {text}")
    return text


async def call(session, tool, arguments):
    result = await session.call_tool(tool, arguments)
    body = envelope(result)
    if body.get("ok") is not True or result.is_error:
        raise AssertionError(f"{tool} refused: {body}")
    return body["data"]


def check(condition, message):
    if not condition:
        raise AssertionError(message)


@contextlib.asynccontextmanager
async def session_as(url, token):
    """An initialized MCP session over Streamable HTTP with the bearer token."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def as_agent(url, token):
    async with session_as(url, token) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        check({"describe", "start_run", "claim", "submit", "decide"} <= tools, f"tools: {tools}")

        described = await call(session, "describe", {})
        check(described["protocol"] == "agentprocess", f"describe: {described}")
        check(described["version"] == "core-2", f"describe: {described}")

        processes = await call(session, "list_processes", {})
        names = [item["name"] for item in processes["items"]]
        check(names == ["purchase-request"], f"list_processes: {processes}")

        started = await call(session, "start_run", {
            "process": "purchase-request",
            "inputs": {"requestId": "PR-PY", "quoteDocument": "https://docs.test/pr-py",
                       "approver": "manager@acme.test"},
            "requestId": str(uuid.uuid4()),
        })
        run_id = started["run"]["id"]
        check(started["run"]["state"] == "active", f"start_run: {started['run']}")

        work = await call(session, "get_work", {"process": "purchase-request"})
        items = [item for item in work["items"] if item["runId"] == run_id]
        check(len(items) == 1 and items[0]["stepId"] == "assess", f"get_work: {work}")
        claim_call = items[0]["claim"]
        check(claim_call["tool"] == "claim", f"claim call: {claim_call}")
        arguments = dict(claim_call["arguments"], requestId=str(uuid.uuid4()))
        claimed = await call(session, "claim", arguments)
        check(claimed["step"]["id"] == "assess", f"claim: {claimed}")

        submitted = await call(session, "submit", {
            "token": claimed["token"], "requestId": str(uuid.uuid4()),
            "output": {"amountUsd": 830.0, "vendor": "Acme Supplies", "justification": "Quote matches the request"},
            "evidence": [{"kind": "link", "ref": "https://erp.test/match/py"}],
            "summary": "Assessed the quote", "next": "team_lead_approval", "reason": "830 USD is under 5000",
        })
        steps = {step["id"]: step["state"] for step in submitted["steps"]}
        check(steps["assess"] == "done" and steps["team_lead_approval"] == "waiting", f"submit: {steps}")

        # A refusal comes back as a tool error envelope, not an exception.
        refused = envelope(await session.call_tool("claim", {
            "runId": run_id, "stepId": "assess", "requestId": str(uuid.uuid4())}))
        check(refused["ok"] is False and refused["error"]["code"] == "conflict", f"re-claim: {refused}")
        return run_id


async def as_person(url, token, run_id):
    async with session_as(url, token) as session:
        work = await call(session, "get_work", {})
        items = [item for item in work["items"] if item["runId"] == run_id]
        check(len(items) == 1, f"person get_work: {work}")
        item = items[0]["workItem"]
        check(item["stepId"] == "team_lead_approval", f"work item: {item}")
        decide = item["decide"]
        check("approved" in decide["decisions"], f"decisions: {decide}")
        arguments = dict(decide["arguments"], requestId=str(uuid.uuid4()), decision="approved")
        decided = await call(session, "decide", arguments)
        review = decided["data"]["steps"]["team_lead_approval"]
        check(review["decision"] == "approved" and review["by"] == "manager@acme.test", f"decide: {review}")
        steps = {step["id"]: step["state"] for step in decided["steps"]}
        check(steps["place_order"] == "ready", f"after decide: {steps}")


async def main(url, agent_token, person_token):
    run_id = await as_agent(url, agent_token)
    await as_person(url, person_token, run_id)
    print(f"walked {run_id}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: walk.py <mcp_url> <agent_token> <person_token>")
    asyncio.run(main(*sys.argv[1:]))
