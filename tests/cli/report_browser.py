#!/usr/bin/env python3
"""Loads the HTML report of `loom simulate --report` in headless Chromium (ctest
cli::report_browser): the DOM after the page's script ran holds the step bar, the timeline
SVG with slices on every stage, the memory bars, the communication chart and the plan
table; a screenshot of the first screen (1280 x 800, what a reader sees on opening it) is
decoded and looked at: it is not blank or of one colour, the title is drawn at the top, and
the step-time bar is there in the colours its legend's swatches show; the browser console
stays silent (no script error, no SVG attribute error, no blocked load). Exit 0 pass, 1 fail,
77 skip (no Chromium: scripts/setup installs Debian's `chromium` when it can). Python 3
standard library only."""
import argparse
import html.parser
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FIRST_SCREEN = (1280, 800)
# The step bar's parts, as the report's style colours them (cli/report_html.cpp STYLE).
STEP_COLOURS = {"c-compute": (0x4e, 0x79, 0xa7), "c-bubble": (0xd0, 0xd0, 0xd0),
                "c-optimizer": (0x76, 0xb7, 0xb2), "c-dp": (0xe1, 0x57, 0x59)}


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
    for svg in ("step-svg", "timeline-svg", "memory-svg", "comm-svg"):
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


def read_png(path):
    """(width, height, rows): rows of (r, g, b) tuples, from an 8-bit RGB or RGBA PNG that is
    not interlaced (what Chromium writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    at, idat, header = 8, [], None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        at += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"PNG of depth {depth}, colour type {colour}, interlace {interlace}")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    previous = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = previous[i], previous[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        previous = line
    return width, height, rows


def near(pixel, colour, tolerance=4):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


def runs_of(row, colour):
    """The longest run of `colour` in `row`, pixels."""
    best = run = 0
    for pixel in row:
        run = run + 1 if near(pixel, colour) else 0
        best = max(best, run)
    return best


def check_first_screen(path, failures):
    """The first screen is a page, not a blank: a PNG of the viewport's size; many colours,
    mostly the white page; the title's dark text across the top; the step-time bar (a row
    where each part of the step is a long run of its colour) under its legend, whose swatches
    are the bar's colours."""
    if not os.path.exists(path):
        failures.append("no screenshot written")
        return
    try:
        width, height, rows = read_png(path)
    except (ValueError, zlib.error, struct.error, TypeError) as e:
        failures.append(f"the screenshot is not a readable PNG: {e}")
        return
    if (width, height) != FIRST_SCREEN:
        failures.append(f"screenshot {width}x{height}, expected {FIRST_SCREEN[0]}x{FIRST_SCREEN[1]}")
        return
    colours = {(r >> 3, g >> 3, b >> 3) for row in rows for r, g, b in row}
    white = sum(1 for row in rows for p in row if min(p) >= 250) / (width * height)
    if len(colours) < 50 or not 0.3 < white < 0.97:
        failures.append(f"the first screen looks blank: {len(colours)} colours, "
                        f"{white:.0%} white")
    # The title: <h1> text, dark, across a good part of the first 70 rows.
    dark = [x for row in rows[:70] for x, p in enumerate(row) if max(p) < 90]
    if len(dark) < 1500 or (max(dark) - min(dark) if dark else 0) < width // 4:
        failures.append(f"no title at the top of the first screen ({len(dark)} dark pixels)")
    # The step bar: a row where the passes' colour runs for 100 px or more and every part
    # present runs for 4 px or more; above it, the legend's swatches in the same colours.
    bar = None
    for y, row in enumerate(rows):
        if runs_of(row, STEP_COLOURS["c-compute"]) >= 100:
            parts = [name for name, colour in STEP_COLOURS.items() if runs_of(row, colour) >= 4]
            if len(parts) >= 3:
                bar = (y, parts)
                break
    if bar is None:
        failures.append("no step-time bar with three or more of its colours on the first screen")
        return
    y, parts = bar
    legend = rows[max(0, y - 40):y]
    for name in parts:
        if not any(runs_of(row, STEP_COLOURS[name]) >= 6 for row in legend):
            failures.append(f"the step bar's {name} colour has no swatch in the legend above it")


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
                        f"--window-size={FIRST_SCREEN[0]},{FIRST_SCREEN[1]}", url)
        if shot.returncode != 0:
            failures.append(f"chromium --screenshot exit {shot.returncode}: {shot.stderr[-2000:]}")
        check_first_screen(screenshot, failures)
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
