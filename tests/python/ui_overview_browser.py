"""Opens the operators' overview of agentprocess serve's web console in a real browser (Chromium
through Playwright): the tiles, the runs-by-state chart and its table, the per-hour chart and its
table, and the waiting work by process, each figure as the Rust test found it through the
protocol's tools; at a phone's width and at a desktop's, with the page checks of ui_browser.py.

Usage: ui_overview_browser.py <expected.json> <server_url> <screenshots_dir> <axe.min.js>

Prints one JSON line the Rust test reads: {"pages": [...]}. Exits non-zero on the first check
that fails, saying what differed.
"""

from ui_browser import DESKTOP, PHONE, check, run_walk, sign_in_as_person

async def tile(page, label):
    """The figure of the tile whose label starts with `label`."""
    figure = page.locator(".tile", has=page.locator("dt", has_text=label)).locator(".figure")
    check(await figure.count() == 1, f"one tile is labelled {label!r}")
    return int(await figure.inner_text())


async def table_rows(page, table_id):
    """A table's body rows, each as its header cell and its data cells' text."""
    rows = {}
    for row in await page.locator(f"#{table_id} tbody tr").all():
        header = (await row.locator("th").inner_text()).strip()
        rows[header] = [(await cell.inner_text()).strip() for cell in await row.locator("td").all()]
    return rows


async def read_overview(page, expected):
    check(await page.locator("h1", has_text="Overview").count() == 1, "the page is the overview")
    for label, key in [("Agent steps ready", "readySteps"), ("People's queue", "peoplesQueue"),
                       ("Open escalations", "openEscalations"), ("Lease expiries", "leaseExpiries"),
                       ("Escalations, last", "escalations")]:
        shown = await tile(page, label)
        check(shown == expected[key], f"{label}: the page shows {shown}, the tools say {expected[key]}")
    # The numbers behind the charts are text, in tables a reader can open.
    await page.click("summary:has-text('Runs by process and state')")
    states = ["active", "waiting", "ended", "cancelled"]
    rows = await table_rows(page, "runs-by-state")
    for process, counts in expected["runsByState"].items():
        wanted = [str(counts[state]) for state in states]
        if all(count == "0" for count in wanted):
            check(process not in rows, f"{process} has no run, yet has a row: {rows}")
            continue
        check(rows.get(process) == wanted, f"{process}: the table shows {rows.get(process)}, the tools say {wanted}")
        # The chart draws the same counts.
        for state in states:
            bars = page.locator(f"svg.bar rect[data-state='{state}']",
                                has=page.locator("title", has_text=f"{process}, {state}:"))
            drawn = [await bar.get_attribute("data-count") for bar in await bars.all()]
            wanted_bars = [] if counts[state] == 0 else [str(counts[state])]
            check(drawn == wanted_bars, f"{process} {state}: the chart draws {drawn}, wanted {wanted_bars}")
    await page.click("summary:has-text('Runs per hour')")
    hours = await table_rows(page, "runs-per-hour")
    check(len(hours) == 24, f"24 hours are listed: {len(hours)}")
    started = sum(int(cells[0]) for cells in hours.values())
    ended = sum(int(cells[1]) for cells in hours.values())
    check((started, ended) == (expected["started"], expected["ended"]),
          f"per hour the table adds up to {started} started and {ended} ended, not {expected['started']} and {expected['ended']}")
    drawn_started = sum([int(await bar.get_attribute("data-count"))
                         for bar in await page.locator("rect[data-series='started']").all()])
    check(drawn_started == expected["started"], f"the hour chart draws {drawn_started} started runs")
    backlog = await table_rows(page, "backlog")
    ready = sum(int(cells[0].split()[0]) for cells in backlog.values())
    check(ready == expected["readySteps"], f"the backlog table lists {ready} ready steps: {backlog}")
    check(all("oldest" in cells[0] for cells in backlog.values() if not cells[0].startswith("0")),
          f"each waiting count says how old its oldest item is: {backlog}")


async def operator_looks(browser, base, expected, checks_for):
    pages = []
    for viewport, name in [(PHONE, "overview"), (DESKTOP, "overview-desktop")]:
        context = await browser.new_context(viewport=viewport)
        page = await context.new_page()
        checks = checks_for(page)
        await page.goto(f"{base}/ui/overview")
        await page.check("#operator")
        await sign_in_as_person(page, "acme", "ops@acme.test", "ops")
        check(page.url == f"{base}/ui/overview", f"after sign-in the browser is at {page.url}")
        await read_overview(page, expected)
        await checks.visited_page(name)
        pages.extend(checks.visited)
        await context.close()
    return pages


if __name__ == "__main__":
    run_walk(operator_looks)
