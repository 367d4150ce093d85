"""Drives agentprocess serve's web UI with a real browser (Chromium through Playwright), and an
MCP client through the dev-mode OAuth flow with the official MCP Python SDK.

Usage: ui_browser.py dev|provider <server_url> <screenshots_dir> <axe.min.js>

dev (a server in dev mode):

1. A person signs in on the dev sign-in page (which shows only the chosen kind's fields, its
   button in view at 1280x900; after a try with errors), sees who they are, is refused a POST
   without the CSRF token, signs out; /ui then sends them to sign in again.
2. The SDK's OAuth client connects to <server_url>/mcp with nothing but the URL: it discovers the
   authorization server, registers, and hands the authorization URL to this browser, which signs
   in as mira@acme.test and allows the client; the code comes back to a loopback redirect URI;
   then the client calls describe and get_work.

provider (a server whose [auth.provider] is tests/oidc/provider.mjs): a person goes from /ui to
the sign-in page, on to the identity provider, signs in there as mira@acme.test, and comes back
to /ui signed in as the provider's token says.

On every page of the server visited: no console errors, no serious or critical axe-core violation, no
horizontal scroll at 375 px, and a screenshot. Prints one JSON line the Rust test reads:
{"pages": [...], "workRuns": [...], "describe": {...}}. Exits non-zero on the first check that
fails, saying what differed.
"""

import asyncio
import http.server
import json
import sys
import threading
import urllib.parse
import warnings
from pathlib import Path

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from playwright.async_api import async_playwright

warnings.simplefilter("ignore", DeprecationWarning)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PHONE = {"width": 375, "height": 740}
DESKTOP = {"width": 1280, "height": 900}


def check(condition, message):
    if not condition:
        raise AssertionError(message)


class PageChecks:
    """Console errors of the server's pages (not of other sites the browser passes through), and
    the checks every page visited passes."""

    def __init__(self, page, base, screenshots, axe_source):
        self.page = page
        self.screenshots = screenshots
        self.axe_source = axe_source
        self.console_errors = []
        self.visited = []

        def record(text):
            if page.url.startswith(base):
                self.console_errors.append(f"{page.url}: {text}")

        page.on("console", lambda message: message.type == "error" and record(message.text))
        page.on("pageerror", lambda error: record(str(error)))

    async def visited_page(self, name):
        """The checks of one page: accessibility, width, console; then its screenshot."""
        page = self.page
        await page.wait_for_load_state("load")
        await page.evaluate(self.axe_source)
        results = await page.evaluate(
            "async () => await axe.run(document, { resultTypes: ['violations'] })")
        bad = [
            f"{violation['id']} ({violation['impact']}): "
            + "; ".join(node["target"][0] for node in violation["nodes"])
            for violation in results["violations"]
            if violation["impact"] in ("serious", "critical")
        ]
        check(not bad, f"{name}: axe-core found {bad}")
        widths = await page.evaluate(
            "() => [document.documentElement.scrollWidth, window.innerWidth]")
        check(widths[0] <= widths[1], f"{name}: scrolls sideways at {widths[1]} px: {widths[0]} px wide")
        check(not self.console_errors, f"{name}: console errors {self.console_errors}")
        await page.screenshot(path=str(self.screenshots / f"{name}.png"), full_page=True)
        self.visited.append(name)


async def text_of(page):
    return await page.inner_text("main")


async def sign_in_as_person(page, organization, email, groups):
    await page.fill("#organization", organization)
    await page.check("#kind-person")
    await page.fill("#email", email)
    await page.fill("#groups", groups)
    await page.click("button[type=submit]:has-text('Sign in')")
    await page.wait_for_load_state("load")


async def sign_in_shows_the_chosen_section(page, checks):
    """Only the person's or the agent's fields show, as the radio says (no script: the page runs
    none), and the Sign in button is in view without scrolling at 1280x900."""
    await page.set_viewport_size(DESKTOP)
    for kind, shown, hidden in [("agent", "#agent_id", "#email"), ("person", "#email", "#agent_id")]:
        await page.check(f"#kind-{kind}")
        check(await page.is_visible(shown), f"{shown} is hidden when {kind} is chosen")
        check(not await page.is_visible(hidden), f"{hidden} shows when {kind} is chosen")
        if kind == "agent":
            await checks.visited_page("sign-in-agent")
        button = await page.locator("button[type=submit]:has-text('Sign in')").bounding_box()
        check(button is not None and button["y"] + button["height"] <= DESKTOP["height"],
              f"the Sign in button is below the fold at 1280x900 ({kind}): {button}")
    await page.set_viewport_size(PHONE)


async def person_signs_in_and_out(browser, base, checks_for):
    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    checks = checks_for(page)

    # Unauthenticated: /ui goes to the sign-in page.
    await page.goto(f"{base}/ui")
    check(page.url == f"{base}/ui/sign-in", f"/ui without a session went to {page.url}")
    await checks.visited_page("sign-in")
    await sign_in_shows_the_chosen_section(page, checks)

    # Every wrong field gets its error next to it.
    await page.fill("#organization", "")
    await page.fill("#email", "mira at acme")
    await page.click("button[type=submit]:has-text('Sign in')")
    await page.wait_for_load_state("load")
    check(page.url == f"{base}/ui/sign-in", f"a bad form went on to {page.url}")
    organization_error = await page.inner_text("#organization-error")
    email_error = await page.inner_text("#email-error")
    check("organization" in organization_error, f"organization error: {organization_error!r}")
    check("email address" in email_error, f"email error: {email_error!r}")
    described = await page.get_attribute("#email", "aria-describedby")
    check("email-error" in described.split(), f"the email input is not described by its error: {described}")
    check(await page.input_value("#email") == "mira at acme", "the form kept what was typed")
    await checks.visited_page("sign-in-errors")

    await sign_in_as_person(page, "acme", "mira@acme.test", "staff, finance")
    check(page.url == f"{base}/ui", f"after sign-in the browser is at {page.url}")
    shown = await text_of(page)
    for expected in ["mira@acme.test", "acme", "staff, finance"]:
        check(expected in shown, f"the home page does not show {expected!r}: {shown!r}")
    await checks.visited_page("home")

    # A POST without the CSRF token, with the session cookie, is refused and changes nothing.
    refused = await page.request.post(f"{base}/ui/sign-out", form={"other": "x"}, max_redirects=0)
    check(refused.status == 403, f"sign-out without CSRF token: {refused.status}")
    check("cannot be accepted" in await refused.text(), "the 403 page says why")
    await page.goto(f"{base}/ui")
    check(page.url == f"{base}/ui", "still signed in after the refused POST")

    await page.click("main button:has-text('Sign out')")
    await page.wait_for_load_state("load")
    check(page.url == f"{base}/ui/sign-in", f"after sign-out the browser is at {page.url}")
    await page.goto(f"{base}/ui")
    check(page.url == f"{base}/ui/sign-in", f"after sign-out /ui went to {page.url}")
    await context.close()
    return checks.visited


class Callback(http.server.BaseHTTPRequestHandler):
    """The MCP client's loopback redirect URI (RFC 8252 §7.3): takes the code and says so."""

    received = None

    def do_GET(self):
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        Callback.received.put_nowait(query)
        body = (b"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Signed in</title>"
                b"<link rel=icon href=data:,></head><body><main><h1>You can close this window</h1>"
                b"</main></body></html>")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class MemoryStorage:
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def mcp_client_signs_in(browser, base, checks_for):
    loop = asyncio.get_running_loop()
    received = asyncio.Queue()

    class ThreadSafeQueue:
        @staticmethod
        def put_nowait(item):
            loop.call_soon_threadsafe(received.put_nowait, item)

    Callback.received = ThreadSafeQueue
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Callback)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    redirect_uri = f"http://127.0.0.1:{server.server_address[1]}/callback"

    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    checks = checks_for(page)
    authorization_urls = []

    async def redirect_handler(authorization_url):
        authorization_urls.append(authorization_url)
        await page.goto(authorization_url)
        check(page.url.startswith(f"{base}/ui/sign-in?next="), f"authorize sent the browser to {page.url}")
        await checks.visited_page("oauth-sign-in")
        await sign_in_as_person(page, "acme", "mira@acme.test", "staff")
        check(page.url.startswith(f"{base}/oauth/authorize?"), f"after sign-in the browser is at {page.url}")
        shown = await text_of(page)
        check("agentprocess browser test" in shown and "mira@acme.test" in shown, f"consent page: {shown!r}")
        await checks.visited_page("oauth-consent")
        async with page.expect_navigation(url=f"{redirect_uri}**"):
            await page.click("button:has-text('Allow')")

    async def callback_handler():
        query = await asyncio.wait_for(received.get(), timeout=60)
        check("code" in query, f"the redirect carried no code: {query}")
        check(query.get("iss") == [base], f"the redirect's iss (RFC 9207): {query.get('iss')}")
        return AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )

    provider = OAuthClientProvider(
        server_url=f"{base}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="agentprocess browser test",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=60) as http_client:
        async with streamable_http_client(f"{base}/mcp", http_client=http_client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                described = envelope(await session.call_tool("describe", {}))
                check(described["ok"] is True, f"describe: {described}")
                work = envelope(await session.call_tool("get_work", {}))
                check(work["ok"] is True, f"get_work: {work}")
    check(len(authorization_urls) == 1, f"the browser was sent to sign in {len(authorization_urls)} times")
    server.shutdown()
    await context.close()
    return checks.visited, described["data"], [item["runId"] for item in work["data"]["items"]]


async def person_signs_in_with_provider(browser, base, checks_for):
    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    checks = checks_for(page)
    await page.goto(f"{base}/ui")
    check(page.url == f"{base}/ui/sign-in", f"/ui without a session went to {page.url}")
    await checks.visited_page("provider-sign-in")
    await page.click("a:has-text('Sign in with the identity provider')")
    await page.wait_for_load_state("load")
    check(not page.url.startswith(base), f"the browser stayed at {page.url}")
    # The provider's own pages: its login form, then its consent.
    await page.fill("input[name=login]", "mira@acme.test")
    await page.fill("input[name=password]", "any password")
    await page.click("button[type=submit]")
    await page.wait_for_load_state("load")
    if not page.url.startswith(base):
        await page.click("button[type=submit]")
    await page.wait_for_url(f"{base}/ui")
    shown = await text_of(page)
    for expected in ["mira@acme.test", "acme", "staff"]:
        check(expected in shown, f"the home page does not show {expected!r}: {shown!r}")
    await checks.visited_page("provider-home")
    await page.click("main button:has-text('Sign out')")
    await page.wait_for_load_state("load")
    check(page.url == f"{base}/ui/sign-in", f"after sign-out the browser is at {page.url}")
    await context.close()
    return checks.visited


def run_walk(walk):
    """The main of a script run as `<data.json> <server_url> <screenshots_dir> <axe.min.js>`:
    opens Chromium and runs `walk(browser, base, data, checks_for)`, which returns the pages it
    visited; prints them as the one JSON line the Rust test reads."""
    data, base = json.loads(sys.argv[1]), sys.argv[2].rstrip("/")
    screenshots, axe_source = Path(sys.argv[3]), Path(sys.argv[4]).read_text()
    screenshots.mkdir(parents=True, exist_ok=True)

    async def run():
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

            def checks_for(page):
                return PageChecks(page, base, screenshots, axe_source)

            pages = await walk(browser, base, data, checks_for)
            await browser.close()
        return pages

    print(json.dumps({"pages": asyncio.run(run())}))


def envelope(result):
    return json.loads(result.content[0].text)


async def main(mode, base, screenshots, axe_path):
    screenshots.mkdir(parents=True, exist_ok=True)
    axe_source = Path(axe_path).read_text()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def checks_for(page):
            return PageChecks(page, base, screenshots, axe_source)

        if mode == "provider":
            summary = {"pages": await person_signs_in_with_provider(browser, base, checks_for)}
        else:
            pages = await person_signs_in_and_out(browser, base, checks_for)
            oauth_pages, described, work_runs = await mcp_client_signs_in(browser, base, checks_for)
            summary = {"pages": pages + oauth_pages, "describe": described, "workRuns": work_runs}
        await browser.close()
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2].rstrip("/"), Path(sys.argv[3]), sys.argv[4]))
