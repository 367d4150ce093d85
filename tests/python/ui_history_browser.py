"""Opens an archived run's page of agentprocess serve's web UI in a real browser (Chromium through
Playwright) as an operator: its timeline, built from the run's history, still shows the agent's
escalation note, the operator's return note and who wrote each, with the page checks of
ui_browser.py.

Usage: ui_history_browser.py <ids.json> <server_url> <screenshots_dir> <axe.min.js>

<ids.json> names the run the Rust test scripted over MCP and then archived ("run"), and the two
notes ("escalation", "returned").

Prints one JSON line the Rust test reads: {"pages": [...]}. Exits non-zero on the first check
that fails, saying what differed.
"""

import asyncio
import json
import sys
from pathlib import Path

from playwright.async_api import async_playwright

from ui_browser import CHROMIUM, CHROMIUM_ARGS, PHONE, PageChecks, check, sign_in_as_person


async def operator_reads_the_timeline(browser, base, ids, checks_for):
    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    checks = checks_for(page)
    await page.goto(f"{base}/ui/runs/{ids['run']}")
    await page.check("#operator")
    await sign_in_as_person(page, "acme", "ops@acme.test", "ops")
    check(page.url == f"{base}/ui/runs/{ids['run']}", f"after sign-in the browser is at {page.url}")
    timeline = await page.inner_text("ol.timeline")
    for expected in [ids["escalation"], ids["returned"], "escalated", "returned", "ops@acme.test",
                     "a_worker", "submitted", "ended the run"]:
        check(expected in timeline, f"the timeline does not show {expected!r}: {timeline!r}")
    escalated = page.locator("ol.timeline li", has_text=ids["escalation"])
    check(await escalated.count() == 1, "one timeline entry holds the escalation note")
    check("a_worker" in await escalated.inner_text(), "the escalation entry names the agent")
    returned = page.locator("ol.timeline li", has_text=ids["returned"])
    check("ops@acme.test" in await returned.inner_text(), "the return entry names the operator")
    await checks.visited_page("run-history-archived")
    await context.close()
    return checks.visited


async def main(ids, base, screenshots, axe_path):
    screenshots.mkdir(parents=True, exist_ok=True)
    axe_source = Path(axe_path).read_text()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def checks_for(page):
            return PageChecks(page, base, screenshots, axe_source)

        pages = await operator_reads_the_timeline(browser, base, ids, checks_for)
        await browser.close()
    print(json.dumps({"pages": pages}))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2].rstrip("/"), Path(sys.argv[3]), sys.argv[4]))
