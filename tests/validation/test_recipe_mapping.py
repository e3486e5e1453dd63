#!/usr/bin/env python3
"""The validator's mapping of the Megatron-Bridge summaries' precision labels to loom's
--fp8-recipe and --scale-swizzle (bench/validate_runs.py), checked label by label and over
every FP8 row of the reference copy: no row may ask a GPU for a recipe it cannot run; of
the recipes' pipeline splits; and the family scores' floor and dense / MoE parts, by hand."""
import json
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import validate_runs  # noqa: E402

ALT = ("FP8 alternative granularity (GB200/B200: 32x32 MX; H100: 128x128 weights / 1x128 "
       "activations blockwise) per page note")


def row(precision, gpu="B200", framework="Megatron-Bridge / NeMo (26.04 NeMo Container)"):
    return {"precision": precision, "hardware": {"gpu": gpu}, "framework": framework}


class RecipeMapping(unittest.TestCase):
    def test_labels(self):
        recipe = validate_runs.mbridge_fp8_recipe
        self.assertEqual(recipe(row("MXFP8")), "mxfp8")
        self.assertEqual(recipe(row("FP8-MX")), "mxfp8")
        self.assertEqual(recipe(row("FP8-CS")), "tensorwise")
        self.assertEqual(recipe(row("FP8")), "tensorwise")
        self.assertEqual(recipe(row("FP8 (precision column absent; parentheses = alternative "
                                    "quantization granularity per page note)")), "tensorwise")
        # The alternative label names both formats: the GPU picks one.
        self.assertEqual(recipe(row(ALT, "H100-SXM5-80GB")), "blockwise")
        self.assertEqual(recipe(row(ALT, "GB200 (NVL72)")), "mxfp8")
        self.assertIsNone(recipe(row("BF16")))
        self.assertIsNone(recipe(row("NVFP4")))

    def test_swizzles_by_container(self):
        early = validate_runs.pre_gemm_ready_scales
        self.assertTrue(early(row("MXFP8", framework="Megatron-Bridge / NeMo (25.09 NeMo Container)")))
        self.assertTrue(early(row("MXFP8", framework="Megatron-Bridge / NeMo (25.11 NeMo Container)")))
        self.assertFalse(early(row("MXFP8", framework="Megatron-Bridge / NeMo (26.02 NeMo Container)")))

    def test_no_row_asks_hopper_for_mxfp8(self):
        path = os.path.join(ROOT, "tests", "validation", "reference", "runs_hopper_blackwell.json")
        runs = json.load(open(path))["runs"]
        fp8 = [r for r in runs if r["id"].startswith("mbridge_")
               and validate_runs.mbridge_fp8_recipe(r)]
        self.assertGreater(len(fp8), 100)
        for r in fp8:
            if r["hardware"]["gpu"].startswith("H100"):
                self.assertNotEqual(validate_runs.mbridge_fp8_recipe(r), "mxfp8", r["id"])


    def test_pipeline_accounting(self):
        args = validate_runs.pipeline_args
        flags = ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
        # Llama 3.1 405B over pp 16 x vpp 8 (Megatron-Bridge GB200 recipes): 126 + 2 = 128.
        a = args(126, 16, 8, "llama3-405b")
        self.assertEqual(a[-2:], flags)
        self.assertNotIn("--pipeline-split", a)
        self.assertIsNone(validate_runs.layout_skip_reason({"pp": 16, "vp": 8, "tp": 4}, 256, 126,
                                                           model="llama3-405b"))
        # Qwen3-235B-A22B (94 layers) over pp 8 x vpp 4: 96 / 32.
        self.assertEqual(args(94, 8, 4, validate_runs.QWEN3_235B)[-2:], flags)
        # Where 2 more layers do not divide, or the recipe does not set it: the even split.
        self.assertIn("--pipeline-split", args(126, 4, 5, "llama3-405b"))
        self.assertIn("--pipeline-split", args(126, 8, 8, "llama3-70b"))
        self.assertIsNotNone(validate_runs.layout_skip_reason({"pp": 16, "vp": 8}, 128, 80,
                                                              model="llama3-70b"))

    def test_nemotron_super_bf16_layers(self):
        f = validate_runs.nemotron_super_bf16_args
        # NVFP4: the MTP modules, layer 0 (Megatron's default start) and the last 14 of 88.
        self.assertEqual(f("NVFP4"), ["--keep-mtp-in-bf16", "--first-last-layers-bf16",
                                      "--num-layers-at-end-in-bf16", "14"])
        self.assertEqual(f("MXFP8"), ["--keep-mtp-in-bf16"])  # the recipe's MTP setting only
        self.assertEqual(f("BF16"), [])


class FamilyScores(unittest.TestCase):
    def family(self):
        fam = validate_runs.Family("f", "F", "tokens/s/GPU")
        # (row id, published, loom); rows a and b have the same loom inputs.
        fam.rows = [("a", 100.0, 110.0), ("b", 200.0, 110.0), ("c", 50.0, 40.0)]
        fam.inputs = {"a": ("x",), "b": ("x",), "c": ("y",)}
        fam.parts = {"a": "MoE", "b": "MoE", "c": "dense"}
        return fam

    def test_floor(self):
        # Group {100, 200}: predicting 100 costs 0 + 100/200 = 0.5, predicting 200 costs
        # 100/100 + 0 = 1: the floor takes 0.5. Row c alone costs nothing: (0.5 + 0) / 3 rows.
        self.assertAlmostEqual(self.family().floor_pct(), 100 * 0.5 / 3)

    def test_parts(self):
        s = self.family().summaries()
        self.assertEqual([x["family"] for x in s], ["f", "f/dense", "f/MoE"])
        self.assertEqual(s[1]["scored"], 1)
        self.assertAlmostEqual(s[1]["mape_pct"], 20.0)  # |40 - 50| / 50
        self.assertAlmostEqual(s[2]["mape_pct"], 100 * (0.1 + 0.45) / 2)
        self.assertEqual(s[1]["part_of"], "f")
        # A guard on a part fails the check on its own.
        failed = validate_runs.check(s, {"guards": {"f/dense": 19.0}})
        self.assertEqual(len(failed), 1)
        self.assertIn("f/dense", failed[0])
        # A part whose every row failed still reports (no MAPE), so its guard fails too.
        fam = self.family()
        fam.rows = fam.rows[:2]
        fam.skipped = [("c", "loom error: x")]
        s = fam.summaries()
        self.assertEqual(s[1]["family"], "f/dense")
        self.assertEqual(s[1]["skipped"], 1)
        self.assertIn("f/dense", validate_runs.check(s, {"guards": {"f/dense": 19.0}})[0])
        # A family of one part reports no parts.
        fam.parts = {"a": "MoE", "b": "MoE", "c": "MoE"}
        self.assertEqual([x["family"] for x in fam.summaries()], ["f"])


if __name__ == "__main__":
    unittest.main()
