"""Drives the operators' process and webhook pages of agentprocess serve with a real browser.

Usage: ui_processes_browser.py <server_url> <screenshots_dir> <axe.min.js> <receiver_url>
       <dead_letter_to_redeliver> <dead_letter_to_delete>

1. An operator imports a PROCESS.md with a mistake and sees the issue next to its line; fixes it
   in the page and imports again; publishing with an unbound role is refused next to the role;
   binds the role, publishes (v1 with its content hash), imports a changed file (file upload) and
   publishes v2; compares v1 with v2; opens v1 (its PROCESS.md and map).
2. On the webhooks page: a webhook with a bad URL is refused at the field; one to
   <receiver_url> is saved; the refusing webhook is deleted; one dead letter is redelivered and
   another deleted.
3. A person without operator rights gets the 403 page.

Every page visited passes the checks of ui_browser.PageChecks (axe-core, 375 px, console) and is
screenshotted. Prints one JSON line: {"pages": [...], "hashes": {"1": ..., "2": ...}}.
"""

import asyncio
import json
import sys
from pathlib import Path

from playwright.async_api import async_playwright

from ui_browser import CHROMIUM, CHROMIUM_ARGS, PHONE, PageChecks, check, text_of

PROCESS = "expense-claim"
# Line 13 names a step that does not exist.
WRONG_LINE = 13
WITH_A_MISTAKE = """---
name: expense-claim
description: Pay back an expense once a finance reviewer approves it.
inputs:
  amount: number
steps:
  - id: check
    agent: Check the receipt against the amount claimed.
    next: review
  - id: review
    person: finance-reviewer
    approve: Approve the expense if the receipt matches the amount.
    next: nowhere
  - id: paid
    finish: approved
---

# Expense claim

One run per expense claim.
"""
FIXED = WITH_A_MISTAKE.replace("next: nowhere", "next: paid")
CHANGED = FIXED.replace("Check the receipt against the amount claimed.",
                        "Check the receipt and the card statement against the amount claimed.")


async def sign_in(page, base, email, operator):
    await page.goto(f"{base}/ui/sign-in")
    await page.fill("#organization", "acme")
    await page.check("#kind-person")
    await page.fill("#email", email)
    await page.fill("#groups", "ops")
    if operator:
        await page.check("#operator")
    await page.click("button[type=submit]:has-text('Sign in')")
    await page.wait_for_load_state("load")


async def submit(page, selector):
    async with page.expect_navigation():
        await page.click(selector)
    await page.wait_for_load_state("load")


async def import_fix_bind_publish_compare(page, base, checks):
    await page.goto(f"{base}/ui/processes")
    await checks.visited_page("processes")

    await page.fill("#source", WITH_A_MISTAKE)
    await submit(page, "button:has-text('Import')")
    issue_row = page.locator(f"tr.line-issue[data-line='{WRONG_LINE}']")
    check(await issue_row.count() >= 1, f"no issue at line {WRONG_LINE}: {await text_of(page)}")
    issue = await issue_row.first.inner_text()
    check("nowhere" in issue and "steps[1].next" in issue, f"the issue at line {WRONG_LINE}: {issue!r}")
    row_before = await page.inner_text(f"tr#line-{WRONG_LINE}")
    check("next: nowhere" in row_before, f"line {WRONG_LINE} reads {row_before!r}")
    check(await page.input_value("#source") == WITH_A_MISTAKE.replace("\r", ""), "the text is kept to fix")
    await checks.visited_page("processes-import-refused")

    # Fixed in the page and imported again.
    await page.fill("#source", (await page.input_value("#source")).replace("next: nowhere", "next: paid"))
    await submit(page, "button:has-text('Import')")
    check(page.url == f"{base}/ui/processes/{PROCESS}?done=imported", f"after the import: {page.url}")
    shown = await text_of(page)
    check("finance-reviewer" in shown and "not bound" in shown, f"the draft's role: {shown!r}")
    await checks.visited_page("process-draft")

    # Publishing with the role unbound is refused, next to the role.
    await submit(page, "button:has-text('Publish the draft')")
    errors = await page.inner_text("#publish-errors")
    check("finance-reviewer" in errors, f"the publish refusal: {errors!r}")
    role_error = await page.inner_text("#group-0-error")
    check("not bound" in role_error, f"the role's error: {role_error!r}")
    await checks.visited_page("process-publish-refused")

    await page.fill("#group-0", "finance")
    await submit(page, "button:has-text('Save group')")
    check("group is saved" in await text_of(page), "the binding's notice")
    await submit(page, "button:has-text('Publish the draft')")
    check(page.url.endswith("?done=published"), f"after publishing: {page.url}")
    hashes = {"1": await page.inner_text("table.versions tbody tr:last-child code.hash")}
    # The draft stays, and is version 1 itself: nothing to publish, here or in the list.
    published_as = await page.inner_text("p.published-as")
    check("version 1" in published_as, f"the draft's publication: {published_as!r}")
    check(await page.locator("button:has-text('Publish the draft')").count() == 0,
          "a publish button for a draft that is version 1")
    await checks.visited_page("process-published")
    await page.goto(f"{base}/ui/processes")
    row = await page.inner_text(f"tr:has(a[href='/ui/processes/{PROCESS}'])")
    check("none: the same as v1" in row and "ready to publish" not in row, f"the process row: {row!r}")

    # A changed file, uploaded this time, becomes v2.
    await page.goto(f"{base}/ui/processes")
    await page.set_input_files("#file", files=[{
        "name": "PROCESS.md", "mimeType": "text/markdown", "buffer": CHANGED.encode()}])
    await submit(page, "button:has-text('Import')")
    check(page.url == f"{base}/ui/processes/{PROCESS}?done=imported", f"after the upload: {page.url}")
    await submit(page, "button:has-text('Publish the draft')")
    hashes["2"] = await page.inner_text("table.versions tbody tr:first-child code.hash")
    check(hashes["1"] != hashes["2"], f"two versions, one hash: {hashes}")

    await page.select_option("#from", "1")
    await page.select_option("#to", "2")
    await submit(page, "button:has-text('Show the changes')")
    added = await page.inner_text("table.diff tr.added")
    removed = await page.inner_text("table.diff tr.removed")
    check("added" in added and "card statement" in added, f"the added line: {added!r}")
    check("removed" in removed and "Check the receipt against" in removed, f"the removed line: {removed!r}")
    await checks.visited_page("process-diff")

    await page.goto(f"{base}/ui/processes/{PROCESS}")
    await submit(page, "table.versions a:has-text('v1')")
    shown = await text_of(page)
    check(hashes["1"] in shown and "next: paid" in shown, f"the version page: {shown!r}")
    alt = await page.get_attribute("figure.process-map img", "alt")
    check(alt and "Process map" in alt, f"the map's text alternative: {alt!r}")
    await version_map_is_drawn(page, base, "1")
    await checks.visited_page("process-version")
    return hashes


async def version_map_is_drawn(page, base, version):
    """The version page's map is the server's SVG of that version (every step of it drawn), and
    the browser drew it."""
    map_path = f"/ui/processes/{PROCESS}/versions/{version}/map.svg"
    source = await page.get_attribute("figure.process-map img", "src")
    check(source == map_path, f"the map image's source: {source!r}")
    response = await page.request.get(f"{base}{map_path}")
    body = await response.text()
    check(response.status == 200, f"{map_path}: {response.status} {body[:200]!r}")
    content_type = response.headers.get("content-type", "")
    check(content_type.startswith("image/svg+xml"), f"{map_path}: content type {content_type!r}")
    check('<svg xmlns="http://www.w3.org/2000/svg"' in body and body.rstrip().endswith("</svg>")
          and f'data-process="{PROCESS}"' in body, f"{map_path} is not {PROCESS}'s map: {body[:300]!r}")
    for step in ["check", "review", "paid"]:
        check(f'data-step="{step}"' in body, f"{map_path} does not draw step {step}: {body!r}")
    drawn = await page.eval_on_selector(
        "figure.process-map img", "image => image.complete && image.naturalWidth > 0")
    check(drawn, f"the browser did not draw {map_path}")


async def manage_webhooks(page, base, checks, receiver_url, redeliver, delete):
    await page.goto(f"{base}/ui/webhooks")
    shown = await text_of(page)
    check("refuser" in shown and redeliver in await page.content(), f"the webhooks page: {shown!r}")
    await checks.visited_page("webhooks")

    await page.fill("#webhook-id", "main")
    await page.fill("#webhook-url", "ftp://files.acme.test/hook")
    await page.fill("#webhook-secret", "whsec-ui-1")
    await submit(page, "button:has-text('Save webhook')")
    url_error = await page.inner_text("#webhook-url-error")
    check("not an absolute http(s) URL" in url_error, f"the URL's error: {url_error!r}")
    check(await page.input_value("#webhook-id") == "main", "the id is kept")
    check(await page.input_value("#webhook-secret") == "", "the secret is not sent back")
    await checks.visited_page("webhooks-refused")

    await page.fill("#webhook-url", receiver_url)
    await page.fill("#webhook-secret", "whsec-ui-1")
    await submit(page, "button:has-text('Save webhook')")
    check("webhook is saved" in await text_of(page), "the save notice")
    check("whsec-ui-1" not in await page.content(), "the secret is never shown")
    await submit(page, "button:has-text('Delete webhook refuser')")
    check("webhook is deleted" in await text_of(page), "the delete notice")

    await submit(page, f"li.dead-letter[data-id='{redeliver}'] button:has-text('Redeliver')")
    check("back in the outbox" in await text_of(page), "the redeliver notice")
    await submit(page, f"li.dead-letter[data-id='{delete}'] button:has-text('Delete')")
    check("dead letter is deleted" in await text_of(page), "the discard notice")
    check(delete not in await page.content(), "the deleted dead letter is gone from the page")
    await checks.visited_page("webhooks-done")


async def not_an_operator(page, base, checks):
    await sign_in(page, base, "mira@acme.test", operator=False)
    for path in ["/ui/processes", f"/ui/processes/{PROCESS}", "/ui/webhooks"]:
        response = await page.goto(f"{base}{path}")
        check(response.status == 403, f"{path} for a non-operator: {response.status}")
        check("Operators only" in await text_of(page), f"{path}: the 403 page says why")
    # The browser logs each 403 answer as a failed resource; nothing else may be in the console.
    checks.console_errors[:] = [error for error in checks.console_errors if "status of 403" not in error]
    await checks.visited_page("processes-forbidden")


async def main(base, screenshots, axe_path, receiver_url, redeliver, delete):
    screenshots.mkdir(parents=True, exist_ok=True)
    axe_source = Path(axe_path).read_text()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = await browser.new_context(viewport=PHONE)
        page = await context.new_page()
        checks = PageChecks(page, base, screenshots, axe_source)
        await sign_in(page, base, "ops@acme.test", operator=True)
        hashes = await import_fix_bind_publish_compare(page, base, checks)
        await manage_webhooks(page, base, checks, receiver_url, redeliver, delete)
        await context.close()

        context = await browser.new_context(viewport=PHONE)
        page = await context.new_page()
        other = PageChecks(page, base, screenshots, axe_source)
        await not_an_operator(page, base, other)
        await context.close()
        await browser.close()
    print(json.dumps({"pages": checks.visited + other.visited, "hashes": hashes}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/"), Path(sys.argv[2]), sys.argv[3], sys.argv[4],
                     sys.argv[5], sys.argv[6]))
