"""Screenshots of a generated Snakemake report as a reader sees it, in headless Chromium: the first
screen, the Claims category with its central page open, and a results table (issue 62: look at what a
person sees, not at the HTML). Needs Debian's `chromium` and the `playwright` package (PyPI; its own
browsers are not needed: `--chromium` names the executable). Run from the repo root:

    snakemake --config scale=tiny --report results/tiny/report.html
    python bench/report_screens.py results/tiny/report.html --out docs/report --colors 128
    python bench/report_screens.py results/ci/report.html --out bench/out/screens --table A_table1

Writes first_screen_<W>x<H>.png, the report as it opens in a window of each of `--first-screens` (no
scrolling: what a reader sees first), then claims.png and table.png (the page `--table` names, in the
Tables category) at --width x --height, into --out. `--page` instead screenshots one page's own HTML
(a claims page as `nmtrepro claims` or `across-scales` wrote it, the report's frame around it left
out), whole, as --out/<its name>.png:

    python bench/report_screens.py --page results/tiny/report/central_claims_across_scales.html --out docs/report
"""
from __future__ import annotations

import argparse
from pathlib import Path

# Chromium on a closed network: no background connections, no sandbox when run as root (the probe's flags).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def open_result(page, category: str, label: str) -> None:
    """Clicks the category in the report's menu (through the Results crumb, where a category is open),
    then the view button of the result whose row holds `label`, and waits for its frame to load."""
    crumb = page.get_by_role("link", name="Results", exact=True)
    if crumb.count():
        crumb.first.click()
    page.get_by_role("link", name=category, exact=True).click()
    page.locator("tr", has_text=label).first.locator("a, button").first.click()
    page.wait_for_timeout(1500)


def shrink(paths: list[Path], colors: int) -> None:
    """Each PNG in `paths` as a palette image of `colors` colours (a screenshot's text and lines keep
    their shapes; the ci report's first screen at 1440x900 took 130 KB at 128 colours, 306 KB in full)."""
    from PIL import Image

    for path in paths:
        Image.open(path).convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", help="the report's HTML file")
    ap.add_argument("--page", help="screenshot this page's HTML alone, whole, instead of a report")
    ap.add_argument("--out", default="bench/out/screens")
    ap.add_argument("--claims", default="central", help="label text of the claims page to open")
    ap.add_argument("--table", default="A_table1", help="label text of the results table to open")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--width", type=int, default=1440)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--colors", type=int, default=0,
                    help="save each shot as a PNG of this many colours (docs/report keeps its files small)")
    ap.add_argument("--first-screens", nargs="+", default=["1440x900", "1920x1080"], metavar="WxH",
                    help="window sizes of the first-screen shots")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not (args.page or args.report):
        ap.error("name a report, or a page with --page")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=FLAGS)
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        if args.page:
            shot = out / f"{Path(args.page).stem}.png"
            page.goto(Path(args.page).resolve().as_uri())
            page.wait_for_timeout(500)
            page.screenshot(path=shot, full_page=True)
            browser.close()
            if args.colors:
                shrink([shot], args.colors)
            print(f"wrote {shot}")
            return
        shots = []
        for size in args.first_screens:
            width, height = map(int, size.split("x"))
            page.set_viewport_size({"width": width, "height": height})
            page.goto(Path(args.report).resolve().as_uri())
            page.wait_for_timeout(1500)
            shots.append(out / f"first_screen_{size}.png")
            page.screenshot(path=shots[-1])
        page.set_viewport_size({"width": args.width, "height": args.height})
        open_result(page, "Claims", args.claims)
        page.screenshot(path=out / "claims.png")
        open_result(page, "Tables", args.table)
        page.screenshot(path=out / "table.png")
        browser.close()
    shots += [out / "claims.png", out / "table.png"]
    if args.colors:
        shrink(shots, args.colors)
    print(f"wrote {', '.join(map(str, shots))}")


if __name__ == "__main__":
    main()
