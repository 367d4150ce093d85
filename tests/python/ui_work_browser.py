"""Drives the inbox and the work item pages of agentprocess serve's web UI with a real browser
(Chromium through Playwright).

Usage: ui_work_browser.py <server_url> <screenshots_dir> <axe.min.js> <plan JSON>

The plan names the runs the Rust test prepared (overdueRun, policyRun, launchRun, escalatedRun),
Mira's groups, and a token of the engineering lead (engineeringLeadToken), with which this
script changes the launch run over MCP while Mira's page is open.

1. Mira signs in; her inbox marks the overdue approval of a test run, refreshes every 30 s.
2. She completes the policy's `write_draft` task: first without a file (each refusal next to its
   field, what she typed kept), then with a file uploaded as evidence.
3. She approves `compliance_review` (the run data, its web addresses as links, above the
   decision; the uploaded file opens from it; the inbox's notice of it shown once, and none for a
   made-up query) and rejects `security_review`, first without the note it needs, then with one.
4. She opens the launch's `marketing_ready` task and types; the engineering lead completes
   their branch meanwhile; her completion is refused as stale, the page shows the fresh run and what she
   typed; she sends it again.
5. An operator signs in, opens the escalated `assess` step and returns it to the agent with a
   note (first without one).

Every page visited passes the checks of ui_browser.py (axe-core, 375 px, console) and is
screenshotted (the approval page also at 1100 px wide: work-approval-wide.png). Prints one JSON
line: {"pages": [...]}.
"""

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import async_playwright

from ui_browser import CHROMIUM, CHROMIUM_ARGS, PHONE, PageChecks, check, envelope, sign_in_as_person, text_of

WIDE = {"width": 1100, "height": 1000}
UPLOADED_TEXT = b"Policy P-7, version 2: MFA for every admin account.\n"


async def open_item(page, base, run_id, step_id):
    """Follows the inbox's link to the item's page."""
    link = page.locator(f'a[href="/ui/work/{run_id}/{step_id}"]')
    check(await link.count() == 1, f"the inbox links {run_id}/{step_id} once: {await text_of(page)!r}")
    await link.click()
    await page.wait_for_load_state("load")
    check(page.url == f"{base}/ui/work/{run_id}/{step_id}", f"the link went to {page.url}")


async def back_in_inbox(page, base, notice):
    check(page.url == f"{base}/ui", f"after the decision the browser is at {page.url}")
    shown = await page.inner_text(".notice")
    check(notice in shown, f"the inbox's notice: {shown!r}, expected {notice!r}")


async def the_notice_is_shown_once(page, base):
    """The decision's notice went with the page that showed it: a reload, as the 30 s refresh
    does, shows none; neither does a link that names a decision in its query."""
    await page.reload()
    await page.wait_for_load_state("load")
    check(await page.locator(".notice").count() == 0, f"the notice after a reload: {await text_of(page)!r}")
    await page.goto(f"{base}/ui?done=rejected&run=r_fake&step=pay_everyone")
    shown = await text_of(page)
    check("Done:" not in shown and "pay_everyone" not in shown, f"a made-up notice: {shown!r}")


async def error_next_to(page, input_id):
    """The error of the input `input_id`: shown, and tied to it for screen readers."""
    error = await page.inner_text(f"#{input_id}-error")
    invalid = await page.get_attribute(f"#{input_id}", "aria-invalid")
    described = await page.get_attribute(f"#{input_id}", "aria-describedby") or ""
    check(invalid == "true", f"#{input_id} is not marked invalid")
    check(f"{input_id}-error" in described.split(), f"#{input_id} is not described by its error: {described}")
    return error


async def inbox_marks_overdue_test_runs(page, base, plan, checks):
    shown = await text_of(page)
    check("updates every 30 seconds" in shown, f"the inbox says it refreshes: {shown!r}")
    refresh = (await page.request.get(f"{base}/ui")).headers.get("refresh")
    check(refresh == "30", f"the inbox's refresh: {refresh!r}")
    entry = page.locator("li.work-entry", has=page.locator(f'a[href="/ui/work/{plan["overdueRun"]}/team_lead_approval"]'))
    marks = await entry.inner_text()
    for expected in ["Overdue", "Test run", "Approval", "purchase-request", "Due", "Open since"]:
        check(expected in marks, f"the overdue test run's entry lacks {expected!r}: {marks!r}")
    check(plan["escalatedRun"] not in shown, "an escalation for operators is not in Mira's inbox")
    await checks.visited_page("inbox")


async def completes_a_task_with_a_file(page, base, plan, checks):
    await open_item(page, base, plan["policyRun"], "write_draft")
    shown = await text_of(page)
    check("Write the next version of the policy" in shown, f"the task's instructions: {shown!r}")
    check("Policy update" in shown, "the process body is shown")
    await checks.visited_page("work-task")

    # Without the summary field and the file: each refusal next to its field, the rest kept.
    await page.fill("#f-output-version", "v2")
    await page.fill("#f-summary", "Second revision")
    await page.click("button:has-text('Complete the task')")
    await page.wait_for_load_state("load")
    summary_error = await error_next_to(page, "f-output-changeSummary")
    check("missing" in summary_error, f"the change summary's error: {summary_error!r}")
    evidence_error = await page.inner_text("#f-evidence-error")
    check("file" in evidence_error, f"the evidence error: {evidence_error!r}")
    files_described = await page.get_attribute("#f-evidence-files", "aria-describedby")
    check("f-evidence-error" in files_described.split(), f"the file input is not described by the error: {files_described}")
    check(await page.input_value("#f-output-version") == "v2", "the version typed is kept")
    check(await page.input_value("#f-summary") == "Second revision", "the summary typed is kept")
    await checks.visited_page("work-task-errors")

    await page.fill("#f-output-changeSummary", "MFA for every admin account")
    with tempfile.TemporaryDirectory() as folder:
        document = Path(folder) / "policy-v2.txt"
        document.write_bytes(UPLOADED_TEXT)
        await page.set_input_files("#f-evidence-files", str(document))
        await page.click("button:has-text('Complete the task')")
        await page.wait_for_load_state("load")
    await back_in_inbox(page, base, "you completed write_draft")
    await checks.visited_page("inbox-after-task")


async def approves_and_rejects_with_a_note(page, base, plan, checks):
    await open_item(page, base, plan["policyRun"], "compliance_review")
    link = page.locator('ul.evidence a[href*="/files/"]')
    check(await link.count() == 1, f"the uploaded file is linked: {await text_of(page)!r}")
    fetched = await page.request.get(await link.get_attribute("href"))
    check(fetched.status == 200 and await fetched.body() == UPLOADED_TEXT, f"the file's link: {fetched.status}")
    buttons = await page.locator("main form button").all_inner_texts()
    check(buttons == ["Approve", "Reject", "Fail the run"], f"an approval's decisions: {buttons}")
    # What is approved comes before the decision, its web addresses as links.
    data_first = await page.evaluate("""() => {
        const data = document.getElementById('run-data-heading');
        const form = document.querySelector('main form');
        return !!(data && form && (data.compareDocumentPosition(form) & Node.DOCUMENT_POSITION_FOLLOWING));
    }""")
    check(data_first, "the run data is not above the decision forms")
    draft_link = page.locator('a.value-link[href="https://docs.test/p-7"]')
    check(await draft_link.count() == 1, f"the draftDocument input is not a link: {await text_of(page)!r}")
    await checks.visited_page("work-approval")
    # The same page on a wide screen, for the README.
    await page.set_viewport_size(WIDE)
    await page.screenshot(path=str(checks.screenshots / "work-approval-wide.png"))
    await page.set_viewport_size(PHONE)
    await page.click("button:has-text('Approve')")
    await page.wait_for_load_state("load")
    await back_in_inbox(page, base, "you approved compliance_review")
    await the_notice_is_shown_once(page, base)

    await open_item(page, base, plan["policyRun"], "security_review")
    await page.click("button:has-text('Reject')")
    await page.wait_for_load_state("load")
    note_error = await error_next_to(page, "f-note")
    check("note" in note_error, f"the note's error: {note_error!r}")
    await checks.visited_page("work-reject-errors")
    await page.fill("#f-note", "Require hardware keys for admins")
    await page.click("button:has-text('Reject')")
    await page.wait_for_load_state("load")
    await back_in_inbox(page, base, "you rejected security_review")


async def engineering_lead_completes(base, plan):
    """The engineering lead completes their branch of the launch over MCP."""
    headers = {"Authorization": f"Bearer {plan['engineeringLeadToken']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http_client:
        async with streamable_http_client(f"{base}/mcp", http_client=http_client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                work = envelope(await session.call_tool("get_work", {}))
                item = next(i["workItem"] for i in work["data"]["items"] if i["runId"] == plan["launchRun"])
                decided = envelope(await session.call_tool("decide", {
                    "runId": plan["launchRun"], "workItemId": item["id"], "snapshot": item["snapshot"],
                    "decision": "completed", "output": {"engineeringNote": "Release checks green"},
                    "evidence": [{"kind": "link", "ref": "https://launch.test/engineering"}],
                    "summary": "Deployed behind the flag", "requestId": "ui-browser-engineering-lead"}))
                check(decided["ok"] is True, f"the engineering lead's decide: {decided}")


async def a_stale_decision_keeps_what_was_typed(page, base, plan, checks):
    await open_item(page, base, plan["launchRun"], "marketing_ready")
    await page.fill("#f-output-marketingNote", "Announcement scheduled for 9:00")
    await page.fill("#f-evidence_links", "https://launch.test/marketing")
    await engineering_lead_completes(base, plan)
    await page.click("button:has-text('Complete the task')")
    await page.wait_for_load_state("load")
    shown = await text_of(page)
    check("This run changed since you opened it" in shown, f"the stale notice: {shown!r}")
    check("Release checks green" in shown, f"the fresh state shows the engineering lead's work: {shown!r}")
    check(await page.input_value("#f-output-marketingNote") == "Announcement scheduled for 9:00", "the output typed is kept")
    check(await page.input_value("#f-evidence_links") == "https://launch.test/marketing", "the link typed is kept")
    await checks.visited_page("work-stale")
    await page.click("button:has-text('Complete the task')")
    await page.wait_for_load_state("load")
    await back_in_inbox(page, base, "you completed marketing_ready")
    await checks.visited_page("inbox-after-stale")


async def operator_returns_an_escalation(browser, base, plan, checks_for):
    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    checks = checks_for(page)
    await page.goto(f"{base}/ui")
    await page.check("#operator")
    await sign_in_as_person(page, "acme", "ops@acme.test", "ops")
    entry = page.locator("li.work-entry", has=page.locator(f'a[href="/ui/work/{plan["escalatedRun"]}/assess"]'))
    marks = await entry.inner_text()
    check("Escalated" in marks, f"the operator's inbox marks the escalation: {marks!r}")
    await checks.visited_page("inbox-operator")
    await open_item(page, base, plan["escalatedRun"], "assess")
    shown = await text_of(page)
    check("The quote is in EUR" in shown and "a_ap" in shown, f"the escalation's note and author: {shown!r}")
    await checks.visited_page("work-escalation")
    await page.click("button:has-text('Return to the agent')")
    await page.wait_for_load_state("load")
    await error_next_to(page, "f-note")
    await checks.visited_page("work-return-errors")
    await page.fill("#f-note", "Use the treasury's USD rate")
    await page.click("button:has-text('Return to the agent')")
    await page.wait_for_load_state("load")
    await back_in_inbox(page, base, "you returned assess")
    await context.close()
    return checks.visited


async def main(base, screenshots, axe_path, plan):
    screenshots.mkdir(parents=True, exist_ok=True)
    axe_source = Path(axe_path).read_text()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def checks_for(page):
            return PageChecks(page, base, screenshots, axe_source)

        context = await browser.new_context(viewport=PHONE)
        page = await context.new_page()
        checks = checks_for(page)
        await page.goto(f"{base}/ui")
        await sign_in_as_person(page, "acme", "mira@acme.test", plan["miraGroups"])
        check(page.url == f"{base}/ui", f"after sign-in the browser is at {page.url}")
        await inbox_marks_overdue_test_runs(page, base, plan, checks)
        await completes_a_task_with_a_file(page, base, plan, checks)
        await approves_and_rejects_with_a_note(page, base, plan, checks)
        await a_stale_decision_keeps_what_was_typed(page, base, plan, checks)
        await context.close()
        operator_pages = await operator_returns_an_escalation(browser, base, plan, checks_for)
        await browser.close()
    print(json.dumps({"pages": checks.visited + operator_pages}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/"), Path(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])))
