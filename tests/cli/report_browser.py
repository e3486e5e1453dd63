#!/usr/bin/env python3
"""Loads the HTML report of `loom simulate --report` in headless Chromium (ctest
cli::report_browser): the DOM after the page's script ran holds the timeline SVG with
slices on every stage, the memory bars, the communication chart and the plan table; a
screenshot is written and is a real image; the browser console stays silent (no script
error, no SVG attribute error, no blocked load). Exit 0 pass, 1 fail, 77 skip (no
Chromium: scripts/setup installs Debian's `chromium` when it can). Python 3 standard
library only."""
import argparse
import html.parser
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SKIP = 77
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WINDOW = (1400, 2400)


class Elements(html.parser.HTMLParser):
    """Collects each element's tag and attributes, and which <svg id=...> it sits in."""

    def __init__(self):
        super().__init__()
        self.elements = []  # (tag, attrs dict, id of the enclosing svg or None)
        self.svg = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs, self.svg[-1] if self.svg else None))
        if tag == "svg":
            self.svg.append(attrs.get("id"))

    def handle_endtag(self, tag):
        if tag == "svg" and self.svg:
            self.svg.pop()


def chromium(browser, profile, *args):
    command = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
               "--hide-scrollbars", f"--user-data-dir={profile}", "--enable-logging=stderr",
               "--v=0", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def console_lines(stderr):
    """Messages the page wrote to the console, as Chromium logs them to stderr."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def check_dom(dom, stages, failures):
    parser = Elements()
    parser.feed(dom)
    tags = parser.elements

    def find(tag, **attrs):
        return [e for e in tags if e[0] == tag and all(e[1].get(k) == v for k, v in attrs.items())]

    def expect(condition, what):
        if not condition:
            failures.append(what)

    body = find("body")
    expect(body and body[0][1].get("data-loom-ready") == "1", "the page's script did not finish")
    for svg in ("timeline-svg", "memory-svg", "comm-svg"):
        expect(find("svg", id=svg), f"no <svg id={svg}>")
    for table in ("summary-table", "plan-table", "memory-table", "comm-table", "config-table",
                  "assumptions-table", "ops-table-0"):
        expect(find("table", id=table), f"no <table id={table}>")
    slices = [e for e in tags if e[0] == "rect" and e[2] == "timeline-svg"
              and "slice" in e[1].get("class", "").split()]
    expect(len(slices) >= 4 * stages, f"{len(slices)} timeline slices for {stages} stages")
    headings = [e for e in tags if e[0] == "text" and e[2] == "timeline-svg"
                and e[1].get("class") == "stage"]
    expect(len(headings) == stages, f"{len(headings)} stage headings, expected {stages}")
    for part in ("weights", "gradients", "optimizer", "activations", "other"):
        bars = [e for e in tags if e[0] == "rect" and e[2] == "memory-svg"
                and e[1].get("class") == f"m-{part}"]
        expect(len(bars) == stages, f"{len(bars)} memory bars of {part}, expected {stages}")
    rows = [e for e in tags if e[0] == "tr"]
    expect(len(rows) > 20, f"{len(rows)} table rows: some tables are empty")


def check_png(path, failures):
    """A PNG of the window's size, larger than a blank page compresses to."""
    if not os.path.exists(path):
        failures.append("no screenshot written")
        return
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        failures.append("the screenshot is not a PNG")
        return
    width, height = struct.unpack(">II", data[16:24])
    if (width, height) != WINDOW:
        failures.append(f"screenshot {width}x{height}, expected {WINDOW[0]}x{WINDOW[1]}")
    if len(data) < 20_000:
        failures.append(f"screenshot of {len(data)} bytes: the page looks blank")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--loom", required=True, help="the loom binary")
    ap.add_argument("--keep", help="copy the report and the screenshot into this directory")
    args = ap.parse_args()
    browser = next((b for b in map(shutil.which, BROWSERS) if b), None)
    if browser is None:
        print("report_browser: SKIP: no chromium (scripts/setup installs Debian's chromium)")
        return SKIP
    stages = 2
    with tempfile.TemporaryDirectory(prefix="loom_report_browser_") as tmp:
        report = os.path.join(tmp, "report.html")
        run = subprocess.run([args.loom, "simulate", "--model", "gpt-1.7b", "--cluster",
                              "dgx-a100", "--tp", "2", "--pp", str(stages), "--gbs", "8",
                              "--seq", "512", "--report", report],
                             capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            print(f"report_browser: loom failed ({run.returncode}): {run.stderr}")
            return 1
        url = "file://" + report
        failures = []
        dom = chromium(browser, os.path.join(tmp, "profile-dom"), "--dump-dom", url)
        if dom.returncode != 0:
            failures.append(f"chromium --dump-dom exit {dom.returncode}: {dom.stderr[-2000:]}")
        check_dom(dom.stdout, stages, failures)
        screenshot = os.path.join(tmp, "report.png")
        shot = chromium(browser, os.path.join(tmp, "profile-shot"), f"--screenshot={screenshot}",
                        f"--window-size={WINDOW[0]},{WINDOW[1]}", url)
        if shot.returncode != 0:
            failures.append(f"chromium --screenshot exit {shot.returncode}: {shot.stderr[-2000:]}")
        check_png(screenshot, failures)
        for line in console_lines(dom.stderr) + console_lines(shot.stderr):
            failures.append(f"console: {line}")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for path in (report, screenshot):
                if os.path.exists(path):
                    shutil.copy(path, args.keep)
    for failure in failures:
        print(f"report_browser: FAIL: {failure}")
    if not failures:
        print(f"report_browser: ok ({browser})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
