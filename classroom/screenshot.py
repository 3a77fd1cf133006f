"""Follow a classroom nbgitpuller link in headless Chromium as a student would; save screenshots.

    python classroom/screenshot.py LINK [--user NAME] [--password PW] [--out artifacts/screenshots]

Opens LINK (printed by ``make classroom``), logs in on the hub's login page, waits while the hub
starts the server and nbgitpuller pulls the course, and stops when JupyterLab shows the notebook.
Saves classroom-login.png and classroom-lab.png. Needs Playwright and Chromium
(``make test-extras``, ``apt-get install chromium``).
"""

import argparse
import os
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("link")
    parser.add_argument("--user", default="ada")
    parser.add_argument("--password", default="attention")
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "screenshots")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(args.link, timeout=60_000)
        page.fill("#username_input", args.user)
        page.fill("#password_input", args.password)
        page.screenshot(path=args.out / "classroom-login.png")
        page.click("#login_submit")
        # spawn page -> nbgitpuller's page -> JupyterLab with the notebook open
        page.wait_for_url("**/lab/tree/**", timeout=240_000)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
        page.wait_for_timeout(3000)
        page.screenshot(path=args.out / "classroom-lab.png")
        print(f"logged in as {args.user}; JupyterLab at {page.url}")
        print(f"screenshots: {args.out / 'classroom-login.png'}, {args.out / 'classroom-lab.png'}")
        browser.close()


if __name__ == "__main__":
    main()
