// Walks a purchase-request run to its finish with the official MCP TypeScript SDK, as an agent
// and a person: node walk.mjs MCP_URL AGENT_TOKEN PERSON_TOKEN PERSON_EMAIL
// Prints one JSON line: what the run looked like at each point, for the Rust test to check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { randomUUID } from "node:crypto";

const [url, agentToken, personToken, personEmail] = process.argv.slice(2);

async function connect(token) {
  const client = new Client({ name: "agentprocess-ts-sdk-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

/** The tool's data; throws on a refusal. */
async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  const envelope = result.structuredContent;
  if (!envelope || !envelope.ok) {
    throw new Error(`${name} refused: ${JSON.stringify(result)}`);
  }
  return envelope.data;
}

const agent = await connect(agentToken);
const person = await connect(personToken);
const tools = (await agent.listTools()).tools.map((tool) => tool.name).sort();
const described = await call(agent, "describe", {});
const started = await call(agent, "start_run", {
  process: "purchase-request",
  inputs: { requestId: "PR-TS-1", quoteDocument: "https://quotes.test/ts-1", approver: personEmail },
  requestId: randomUUID(),
});
const runId = started.run.id;
const work = await call(agent, "get_work", { process: "purchase-request" });
const item = work.items.find((i) => i.runId === runId);
const claimed = await call(agent, item.claim.tool, { ...item.claim.arguments, requestId: randomUUID() });
await call(agent, "submit", {
  token: claimed.token,
  output: { amountUsd: 900, vendor: "Office Supply Co", justification: "Two desks." },
  evidence: [{ kind: "link", ref: "https://quotes.test/ts-1" }],
  summary: "Matched the quote; under the team lead's limit.",
  next: "team_lead_approval",
  reason: "900 USD is within 5000.",
  requestId: randomUUID(),
});
const personWork = await call(person, "get_work", { limit: 100 });
const workItem = personWork.items.find((i) => i.runId === runId).workItem;
await call(person, workItem.decide.tool, { ...workItem.decide.arguments, requestId: randomUUID(), decision: "approved" });
const order = await call(agent, "claim", { runId, stepId: "place_order", requestId: randomUUID() });
const ended = await call(agent, "submit", {
  token: order.token,
  output: { orderNumber: "PO-TS-1" },
  evidence: [{ kind: "link", ref: "https://orders.test/PO-TS-1" }],
  summary: "Ordered.",
  requestId: randomUUID(),
});
console.log(JSON.stringify({
  tools,
  protocol: `${described.protocol} ${described.version}`,
  claimedStep: claimed.step.id,
  decisions: workItem.decide.decisions,
  state: ended.run.state,
  outcome: ended.run.outcome,
  approvedBy: ended.data.steps.team_lead_approval.by,
}));
await agent.close();
await person.close();
