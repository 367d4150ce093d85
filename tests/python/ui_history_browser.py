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

from ui_browser import PHONE, check, run_walk, sign_in_as_person


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


if __name__ == "__main__":
    run_walk(operator_reads_the_timeline)
