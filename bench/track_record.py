"""loom's track record: the residual of every scored published run with its plan's regime
(strategies/bands/track_record.json, compiled into loom for its error bands), the
leave-one-family-out coverage of those bands, and the check that the committed record
matches loom as built. Used by validate_runs.py (--write-track-record, --band-coverage,
--check). Python 3 stdlib only.

Residual convention: error = (loom - published) / published on step time (a throughput or
TFLOP/s metric, inverse to step time, is converted: error = published / loom - 1) or on peak
memory. A band's published value is loom / (1 + error), so the 80% band of a prediction is
[loom / (1 + q90), loom / (1 + q10)]: a published run lies inside its band exactly when
q10 <= error <= q90.

band_for mirrors strategies/bands/error_band.cpp find_band (the feature order, the fewest
runs, the scale limit, the quantile); change both together.
"""
import json
import os

# strategies/bands/error_band.cpp FEATURES, kept longest first.
FEATURES = ["generation", "moe", "precision", "dims", "framework", "scale", "zero3",
            "recompute", "overlaps"]
MIN_RUNS = {"time": 8, "memory": 5}  # band_min_runs
SCALE_LIMIT = 4.0                    # BAND_SCALE_LIMIT
COVERAGE = 0.8                       # BAND_COVERAGE
STALE_POINTS = 0.5                   # a committed residual this far off the current one is stale
REGENERATE = ("run bench/validate_runs.py --loom build/loom --write-track-record "
              "strategies/bands/track_record.json and rebuild loom")


def metric_kind(family_metric):
    """'memory' for peak memory, 'time' for step time or a rate inverse to it."""
    return "memory" if "GiB" in family_metric else "time"


def residual(family_metric, published, loom):
    """The step-time (or memory) residual of one row whose metric is family_metric."""
    if "GiB" in family_metric or family_metric.startswith("step"):
        return (loom - published) / published
    return published / loom - 1.0  # TFLOP/s, tokens/s: inverse to step time


def records(fams, order):
    """Every scored row of every family with the regime loom printed for it."""
    out, missing = [], 0
    for key in order:
        fam = fams[key]
        for rid, published, loom in fam.rows:
            regime = fam.regimes.get(rid)
            if regime is None:
                missing += 1
                continue
            out.append({"family": key, "id": rid, "metric": metric_kind(fam.metric),
                        "error": round(residual(fam.metric, published, loom), 5),
                        "regime": regime})
    return out, missing


def held_out(runs):
    """Leave-one-family-out coverage by metric over every family's rows (None where no family's
    rows could be checked against bands from the others: a single memory family)."""
    out = {}
    for metric in ("time", "memory"):
        sub = [r for r in runs if r["metric"] == metric]
        rows = [r for r in coverage_table(sub) if r["family"] != "all"]
        checked = sum(r["rows"] - r["extrapolated"] for r in rows)
        inside = sum(r["lofo_coverage"] * r["rows"] for r in rows)
        out[metric] = round(inside / checked, 3) if checked and len(rows) > 1 else None
    return out


def write(path, runs):
    """The record, one run per line (readable diffs), with the bands' leave-one-family-out
    coverage, which loom prints beside the nominal one."""
    head = {"comment": "loom's residuals on the published runs bench/validate_runs.py scores, "
                       "each with its plan's regime (loom's own `bands.regime`); compiled into "
                       "loom for its error bands (strategies/bands/README.md). Generated: do not "
                       "edit; " + REGENERATE + ".",
            "coverage": COVERAGE,
            "held_out_coverage": held_out(runs)}
    with open(path, "w") as f:
        f.write("{\n")
        for k, v in head.items():
            f.write(f" {json.dumps(k)}: {json.dumps(v)},\n")
        f.write(' "runs": [\n')
        f.write(",\n".join("  " + json.dumps(r, sort_keys=False) for r in runs))
        f.write("\n ]\n}\n")


def quantile(values, p):
    """Linear interpolation between order statistics (error_band.cpp quantile)."""
    if not values:
        return 0.0
    v = sorted(values)
    h = (len(v) - 1) * min(max(p, 0.0), 1.0)
    lo = int(h // 1)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def band_for(runs, regime, metric):
    """(q10, q90, runs behind it, extrapolation) for a regime, as loom's find_band."""
    pool = [r for r in runs if r["metric"] == metric]
    largest = max((r["regime"]["gpus"] for r in pool), default=0)
    beyond = regime["gpus"] > SCALE_LIMIT * largest
    lo_p, hi_p = 0.5 - COVERAGE / 2, 0.5 + COVERAGE / 2
    if not beyond:
        for kept in range(len(FEATURES), 0, -1):
            errs = [r["error"] for r in pool
                    if all(r["regime"][f] == regime[f] for f in FEATURES[:kept])]
            if len(errs) >= MIN_RUNS[metric]:
                return quantile(errs, lo_p), quantile(errs, hi_p), len(errs), False
    errs = [r["error"] for r in pool]
    return quantile(errs, lo_p), quantile(errs, hi_p), len(errs), True


def coverage_table(runs):
    """Per family: bands built from every other family's runs, checked on this family's
    (leave-one-family-out), beside the in-sample coverage."""
    rows = []
    families = []
    for r in runs:
        if r["family"] not in families:
            families.append(r["family"])
    tot = {"rows": 0, "lofo": 0, "insample": 0, "extrap": 0, "width": 0.0}
    for fam in families:
        held = [r for r in runs if r["family"] == fam]
        rest = [r for r in runs if r["family"] != fam]
        lofo = ins = extrap = 0
        width = 0.0
        for r in held:
            q10, q90, _, ex = band_for(rest, r["regime"], r["metric"])
            lofo += q10 <= r["error"] <= q90
            extrap += ex
            width += q90 - q10
            i10, i90, _, _ = band_for(runs, r["regime"], r["metric"])
            ins += i10 <= r["error"] <= i90
        n = len(held)
        rows.append({"family": fam, "metric": held[0]["metric"], "rows": n,
                     "lofo_coverage": lofo / n, "insample_coverage": ins / n,
                     "extrapolated": extrap, "mean_width_pts": 100 * width / n})
        tot["rows"] += n
        tot["lofo"] += lofo
        tot["insample"] += ins
        tot["extrap"] += extrap
        tot["width"] += width
    if tot["rows"]:
        rows.append({"family": "all", "metric": "", "rows": tot["rows"],
                     "lofo_coverage": tot["lofo"] / tot["rows"],
                     "insample_coverage": tot["insample"] / tot["rows"],
                     "extrapolated": tot["extrap"],
                     "mean_width_pts": 100 * tot["width"] / tot["rows"]})
    return rows


def print_coverage(rows):
    print(f"\nband coverage (nominal {100 * COVERAGE:.0f}%): leave-one-family-out = bands built "
          "without the family, checked on it")
    print(f"{'family':<16} {'metric':<7} {'rows':>5} {'LOFO':>6} {'in-sample':>9} "
          f"{'extrapolated':>12} {'mean width':>10}")
    for r in rows:
        print(f"{r['family']:<16} {r['metric']:<7} {r['rows']:>5} "
              f"{100 * r['lofo_coverage']:>5.0f}% {100 * r['insample_coverage']:>8.0f}% "
              f"{r['extrapolated']:>12} {r['mean_width_pts']:>8.1f}pt")


def check_fresh(path, runs, complete):
    """One failure line when the committed record is stale, else None. complete: every family
    and row was run (not --only / --quick), so rows added or dropped count too."""
    if not os.path.exists(path):
        return f"track record {path} missing; {REGENERATE}"
    committed = {(r["family"], r["id"]): r for r in json.load(open(path))["runs"]}
    current = {(r["family"], r["id"]): r for r in runs}
    stale = []
    for key, r in current.items():
        old = committed.get(key)
        if old is None:
            if complete:
                stale.append((float("inf"), key, None, r["error"]))
            continue
        diff = abs(old["error"] - r["error"]) * 100
        if diff > STALE_POINTS or old["regime"] != r["regime"]:
            stale.append((diff, key, old["error"], r["error"]))
    if complete:
        stale += [(float("inf"), k, committed[k]["error"], None) for k in committed
                  if k not in current]
    if not stale:
        return None
    stale.sort(key=lambda s: -s[0])
    _, (fam, rid), old, new = stale[0]
    was = "absent" if old is None else f"{100 * old:+.1f}%"
    now = "absent" if new is None else f"{100 * new:+.1f}%"
    return (f"track record stale: {len(stale)} residual(s) of {path} differ from loom's by more "
            f"than {STALE_POINTS} points or in regime (e.g. {fam} {rid}: {was} committed, {now} "
            f"now); {REGENERATE}")
