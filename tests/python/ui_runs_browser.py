"""Walks the runs area of agentprocess serve's web UI in a real browser (Chromium through
Playwright) as an operator, with the page checks of ui_browser.py on every page.

Usage: ui_runs_browser.py <ids.json> <server_url> <screenshots_dir> <axe.min.js>

<ids.json> names the runs the Rust test scripted over MCP: reworked (a step sent back and done
again), waiting (on its approval), rejectedPass (its rework ready for two hours), escalated,
overdue, cancel (the run to cancel), lapsed (a triage whose claim lapsed), held (a triage
escalated, returned and claimed again), fresh (a triage just started), and the held run's
escalationNote and returnNote.

1. The runs table on a phone, as stacked rows: filtered by process with two runs a page, on to
   the next page; a state; an input value; overdue; stuck (ready and unclaimed too long, or
   claims lapsed); sorted by state through the form; a refused page size shown next to its field.
2. A reworked run's page shows both attempts; the waiting run's map image loads at its own size;
   the held run's page says who holds its claim until when, and its returned escalation.
3. The escalation queue and the trust report.
4. Cancel: without a reason the form says so next to the field, then with one the run page
   shows it cancelled with the reason.
5. On a wide screen: the table with its headers, sorted by a header link, and the held run's
   page (the screenshots runs-table-wide and run-page-wide).

Prints one JSON line the Rust test reads: {"pages": [...]}. Exits non-zero on the first check
that fails, saying what differed.
"""

from ui_browser import DESKTOP, PHONE, check, run_walk, sign_in_as_person, text_of

# A desktop screen, for the table with its headers and the screenshots of the docs.


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

    # A state: every row says it.
    await page.goto(f"{base}/ui/runs")
    await page.select_option("#state", "ended")
    await page.click("button:has-text('Show runs')")
    await page.wait_for_load_state("load")
    states = await page.locator(".run-row td[data-label='State'] .state").all_inner_texts()
    check(states and all(state == "ended" for state in states), f"state=ended shows {states}")
    # Stacked on a phone: each cell says what it is.
    label = await page.locator(".run-row td[data-label='State']").first.evaluate(
        "cell => getComputedStyle(cell, '::before').content")
    check(label == '"State"', f"the state cell's label on a phone: {label!r}")
    await checks.visited_page("runs-state")

    # Stuck: ready and unclaimed for more than an hour, the longest waiting first.
    await page.goto(f"{base}/ui/runs")
    await page.check("#stuck")
    await page.fill("#waited", "60")
    await page.fill("#lapsed", "")
    await page.click("button:has-text('Show runs')")
    await page.wait_for_load_state("load")
    rows = await page.locator(".run-row").all_inner_texts()
    check(len(rows) == 2 and ids["rejectedPass"] in rows[0] and ids["lapsed"] in rows[1],
          f"stuck for an hour shows {rows}")
    check(all("Stuck" in row and "unclaimed for 2 h" in row for row in rows), f"stuck rows: {rows}")
    await checks.visited_page("runs-stuck")
    # Or claims lapsed more than none, however long the step waited.
    await page.fill("#waited", "600")
    await page.fill("#lapsed", "0")
    await page.click("button:has-text('Show runs')")
    await page.wait_for_load_state("load")
    rows = await page.locator(".run-row").all_inner_texts()
    check(len(rows) == 1 and ids["lapsed"] in rows[0] and "1 claim lapsed" in rows[0], f"lapsed claims show {rows}")
    await checks.visited_page("runs-stuck-lapsed")

    # Sorted through the form (a phone hides the header links): by state, cancelled first.
    await page.goto(f"{base}/ui/runs?limit=100")
    await page.select_option("#sort", "state")
    await page.select_option("#order", "desc")
    await page.click("button:has-text('Show runs')")
    await page.wait_for_load_state("load")
    check("sort=state" in page.url and "order=desc" in page.url, f"the sorted page's address: {page.url}")
    states = await page.locator(".run-row td[data-label='State'] .state").all_inner_texts()
    rank = ["active", "waiting", "ended", "cancelled"]
    check(states == sorted(states, key=rank.index, reverse=True) and len(set(states)) > 1,
          f"sorted by state, cancelled first: {states}")
    sort = await page.get_attribute("th:has(a:has-text('State'))", "aria-sort")
    check(sort == "descending", f"the state header's aria-sort: {sort!r}")
    await checks.visited_page("runs-sorted")

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
    shown_width = await image.evaluate("img => img.getBoundingClientRect().width")
    check(abs(shown_width - width) < 1, f"the map is shown {shown_width} px wide, not at its own {width} px")
    box = await page.locator(".run-map .map-box").evaluate("box => [box.scrollWidth, box.clientWidth]")
    check(box[0] > box[1], f"on a phone the map scrolls in its own box: {box}")
    await checks.visited_page("run-map")

    # The held run: who holds the claim until when, and the escalation returned.
    await page.goto(f"{base}/ui/runs/{ids['held']}")
    claim = await page.inner_text(".claims")
    check("sort is held by" in claim and "until" in claim, f"the claim: {claim!r}")
    timeline = await page.inner_text(".timeline")
    for expected in ["escalated", ids["escalationNote"], "returned", ids["returnNote"]]:
        check(expected in timeline, f"the timeline does not show {expected!r}: {timeline!r}")
    await checks.visited_page("run-held")

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


async def operator_reads_a_wide_table(browser, base, ids, checks_for):
    context = await browser.new_context(viewport=DESKTOP)
    page = await context.new_page()
    checks = checks_for(page)
    await page.goto(f"{base}/ui/runs")
    await page.check("#operator")
    await sign_in_as_person(page, "acme", "ops@acme.test", "ops")
    await page.goto(f"{base}/ui/runs?limit=12")
    headers = await page.locator(".runs-table thead th").all_inner_texts()
    check([h.strip(" ▲▼") for h in headers] == ["Run", "Process", "State", "Current steps", "Inputs", "Started", "Updated"],
          f"the table's headers: {headers}")
    check(await page.get_attribute("th:has(a:has-text('Started'))", "aria-sort") == "ascending",
          "the listing's order is said on Started")
    # A header link sorts the page: by process, A to Z.
    await page.click(".runs-table thead a:has-text('Process')")
    await page.wait_for_load_state("load")
    processes = await page.locator(".run-row td[data-label='Process']").all_inner_texts()
    check(processes == sorted(processes), f"sorted by process: {processes}")
    check(await page.get_attribute("th:has(a:has-text('Process'))", "aria-sort") == "ascending",
          "the process header says it sorts")
    await checks.visited_page("runs-table-wide")
    await page.goto(f"{base}/ui/runs/{ids['held']}")
    check("is held by" in await page.inner_text(".claims"), "the wide run page names the claim holder")
    await checks.visited_page("run-page-wide")
    await context.close()
    return checks.visited


async def operator_walks_and_reads_wide(browser, base, ids, checks_for):
    pages = await operator_walks_the_runs(browser, base, ids, checks_for)
    return pages + await operator_reads_a_wide_table(browser, base, ids, checks_for)


if __name__ == "__main__":
    run_walk(operator_walks_and_reads_wide)
