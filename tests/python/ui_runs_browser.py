"""Walks the runs area of agentprocess serve's web UI in a real browser (Chromium through
Playwright) as an operator, with the page checks of ui_browser.py on every page.

Usage: ui_runs_browser.py <ids.json> <server_url> <screenshots_dir> <axe.min.js>

<ids.json> names the runs the Rust test scripted over MCP: reworked (a step sent back and done
again), waiting (on its approval), rejectedPass, escalated, overdue, cancel (the run to cancel).

1. The runs list: filtered by process with two runs a page, on to the next page; an input value;
   overdue; a refused page size shown next to its field.
2. A reworked run's page shows both attempts; the waiting run's map image loads.
3. The escalation queue and the trust report.
4. Cancel: without a reason the form says so next to the field, then with one the run page
   shows it cancelled with the reason.

Prints one JSON line the Rust test reads: {"pages": [...]}. Exits non-zero on the first check
that fails, saying what differed.
"""

import asyncio
import json
import sys
from pathlib import Path

from playwright.async_api import async_playwright

from ui_browser import CHROMIUM, CHROMIUM_ARGS, PHONE, PageChecks, check, sign_in_as_person, text_of


async def operator_walks_the_runs(browser, base, ids, checks_for):
    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    checks = checks_for(page)
    await page.goto(f"{base}/ui/runs")
    await page.check("#operator")
    await sign_in_as_person(page, "acme", "ops@acme.test", "ops")
    check(page.url == f"{base}/ui/runs", f"after sign-in the browser is at {page.url}")
    await checks.visited_page("runs")

    # Filters: a process, two runs a page, then the next page.
    await page.fill("#process", "screened-payment")
    await page.fill("#limit", "2")
    await page.click("button:has-text('Show runs')")
    await page.wait_for_load_state("load")
    first = await page.locator(".run-row").count()
    check(first == 2, f"the first page shows {first} runs")
    await checks.visited_page("runs-filtered")
    await page.click("a:has-text('Next page')")
    await page.wait_for_load_state("load")
    check("cursor=" in page.url and "limit=2" in page.url, f"the next page's address: {page.url}")
    check(await page.input_value("#process") == "screened-payment", "the next page keeps the filters")
    await checks.visited_page("runs-next-page")

    # An input value, and overdue.
    await page.goto(f"{base}/ui/runs")
    await page.fill("#inputs", "payment=P-3")
    await page.click("button:has-text('Show runs')")
    await page.wait_for_load_state("load")
    rows = await page.locator(".run-row").all_inner_texts()
    check(len(rows) == 1 and ids["rejectedPass"] in rows[0], f"payment=P-3 shows {rows}")
    await page.goto(f"{base}/ui/runs")
    await page.check("#overdue")
    await page.click("button:has-text('Show runs')")
    await page.wait_for_load_state("load")
    rows = await page.locator(".run-row").all_inner_texts()
    check(len(rows) == 1 and ids["overdue"] in rows[0] and "Overdue" in rows[0], f"overdue shows {rows}")
    await checks.visited_page("runs-overdue")

    # A refused page size, next to its field; what was typed stays.
    await page.fill("#limit", "0")
    await page.click("button:has-text('Show runs')")
    await page.wait_for_load_state("load")
    error = await page.inner_text("#limit-error")
    check("limit" in error, f"the limit error: {error!r}")
    check(await page.get_attribute("#limit", "aria-invalid") == "true", "the limit field is marked invalid")
    check(await page.input_value("#limit") == "0", "the form kept the typed limit")
    await checks.visited_page("runs-refused-filter")

    # The reworked run: both attempts of the screening.
    await page.goto(f"{base}/ui/runs/{ids['reworked']}")
    shown = await text_of(page)
    for expected in ["Reworked steps", "[check:fail]", "the policy reference is missing", "(attempt 2)"]:
        check(expected in shown, f"the reworked run does not show {expected!r}")
    await checks.visited_page("run-reworked")

    # The waiting run: its map loads as an image with a text alternative.
    await page.goto(f"{base}/ui/runs/{ids['waiting']}")
    image = page.locator(".run-map img")
    width = await image.evaluate("img => img.complete ? img.naturalWidth : 0")
    check(width > 0, "the run's map did not load")
    alt = await image.get_attribute("alt")
    check("current: sign_off" in alt, f"the map's text alternative: {alt!r}")
    await checks.visited_page("run-map")

    await page.click("nav a:has-text('Escalations')")
    await page.wait_for_load_state("load")
    shown = await text_of(page)
    check(ids["escalated"] in shown and "the policy does not cover refunds" in shown, f"escalations: {shown!r}")
    href = await page.locator(".escalation a", has_text="Decide screen").get_attribute("href")
    check(href == f"/ui/work/{ids['escalated']}/screen", f"the escalation links to {href}")
    await checks.visited_page("escalations")

    await page.click("nav a:has-text('Trust')")
    await page.wait_for_load_state("load")
    await page.select_option("#process", "screened-payment")
    await page.click("button:has-text('Show the report')")
    await page.wait_for_load_state("load")
    shown = await text_of(page)
    check("60% (3 of 5 decided verdicts)" in shown, f"the trust report: {shown!r}")
    await checks.visited_page("trust")

    # Cancel: the reason is required, then the run shows it.
    await page.goto(f"{base}/ui/runs/{ids['cancel']}")
    await page.click("button:has-text('Cancel the run')")
    await page.wait_for_load_state("load")
    error = await page.inner_text("#reason-error")
    check("reason" in error, f"the reason error: {error!r}")
    await checks.visited_page("run-cancel-needs-reason")
    await page.fill("#reason", "The note was withdrawn")
    await page.click("button:has-text('Cancel the run')")
    await page.wait_for_load_state("load")
    check(page.url == f"{base}/ui/runs/{ids['cancel']}", f"after cancel the browser is at {page.url}")
    shown = await text_of(page)
    check("cancelled" in shown and "Reason: The note was withdrawn" in shown, f"the cancelled run: {shown!r}")
    check(await page.locator("#reason").count() == 0, "a cancelled run offers no cancel form")
    await checks.visited_page("run-cancelled")
    await context.close()
    return checks.visited


async def main(ids, base, screenshots, axe_path):
    screenshots.mkdir(parents=True, exist_ok=True)
    axe_source = Path(axe_path).read_text()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def checks_for(page):
            return PageChecks(page, base, screenshots, axe_source)

        pages = await operator_walks_the_runs(browser, base, ids, checks_for)
        await browser.close()
    print(json.dumps({"pages": pages}))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2].rstrip("/"), Path(sys.argv[3]), sys.argv[4]))
