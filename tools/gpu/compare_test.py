#!/usr/bin/env python3
"""Tests for compare.py on hand-made documents. Plain python3, no torch:

  python3 -m unittest discover -s tools/gpu -p compare_test.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

COMPARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare.py")


def Ref(greedy, prompts=None):
    return {"model": "m", "prompts": prompts or [[1, 2]] * len(greedy), "greedy": greedy,
            "max_tokens": len(greedy[0])}


def Ours(greedy, forced):
    return {"greedy": greedy, "teacher_forced_top1": forced}


class BeamScoreTest(unittest.TestCase):
    def Ref(self, beams):
        ref = Ref([[1, 2]])
        ref["beam"] = {"width": 2, "max_tokens": 4, "beams": beams}
        return ref

    def testNoBeamsInTheReference(self):
        self.assertIsNone(compare.BeamScore(Ref([[1, 2]]), {}))

    def testPrefixPerPromptAndRank(self):
        beams = [[[1, 2, 3, 4], [1, 2, 3, 5]], [[7, 7, 7, 7], [8, 8, 8, 8]]]
        ours = {"beams": [[[1, 2, 3, 4], [1, 9, 3, 5]], [[8, 8, 8, 8], [7, 7, 7, 7]]]}
        # Ranks swapped in prompt 1 count as divergence at 0; prompt 0 rank 1 at 1.
        self.assertEqual(compare.BeamScore(self.Ref(beams), ours), (1 + 1 / 4 + 0 + 0) / 4)

    def testMalformed(self):
        beams = [[[1, 2, 3, 4], [1, 2, 3, 5]]]
        for ours in ({}, {"beams": []}, {"beams": [[[1, 2, 3, 4]]]},
                     {"beams": [[[1, 2, 3, 4], [1, 2, 3]]]}):
            with self.assertRaises(compare.Malformed):
                compare.BeamScore(self.Ref(beams), ours)


class ScoreTest(unittest.TestCase):
    def testIdenticalScoresOne(self):
        g = [[5, 6, 7, 8], [9, 9, 9, 9]]
        self.assertEqual(compare.Score(Ref(g), Ours(g, g)), (1.0, 1.0))

    def testPrefixCountsTokensBeforeFirstDivergence(self):
        ref = Ref([[1, 2, 3, 4], [1, 2, 3, 4]])
        # Prompt 0 diverges at 2 (later agreement does not count), prompt 1 at 0.
        ours = Ours([[1, 2, 0, 4], [0, 2, 3, 4]], ref["greedy"])
        self.assertEqual(compare.Score(ref, ours), ((2 / 4 + 0 / 4) / 2, 1.0))

    def testTeacherIsFractionOfPositions(self):
        ref = Ref([[1, 2, 3, 4], [5, 6, 7, 8]])
        ours = Ours(ref["greedy"], [[1, 0, 3, 4], [0, 0, 7, 8]])
        self.assertEqual(compare.Score(ref, ours), (1.0, 5 / 8))

    def testMetricsAreIndependent(self):
        ref = Ref([[1, 2]])
        self.assertEqual(compare.Score(ref, Ours([[1, 2]], [[0, 0]])), (1.0, 0.0))
        self.assertEqual(compare.Score(ref, Ours([[0, 0]], [[1, 2]])), (0.0, 1.0))

    def testMalformed(self):
        ref = Ref([[1, 2], [3, 4]])
        cases = {
            "missing key": Ours([[1, 2], [3, 4]], None),
            "too few prompts": Ours([[1, 2]], [[1, 2]]),
            "wrong length": Ours([[1, 2], [3]], [[1, 2], [3, 4]]),
            "not ints": Ours([[1, 2], [3, "4"]], [[1, 2], [3, 4]]),
            "floats": Ours([[1, 2], [3, 4.0]], [[1, 2], [3, 4]]),
            "booleans": Ours([[1, 2], [3, True]], [[1, 2], [3, 4]]),
            "not an object": [[1, 2]],
        }
        for name, ours in cases.items():
            with self.subTest(name), self.assertRaises(compare.Malformed):
                compare.Score(ref, ours)
        for name, bad in {"no max_tokens": dict(ref, max_tokens=None),
                          "ref greedy too short": dict(ref, max_tokens=3),
                          "no prompts": dict(ref, prompts=[])}.items():
            with self.subTest(name), self.assertRaises(compare.Malformed):
                compare.Score(bad, Ours(ref["greedy"], ref["greedy"]))


class CommandTest(unittest.TestCase):
    def Run(self, ref, ours, *flags):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, doc in (("ref.json", ref), ("ours.json", ours)):
                paths.append(os.path.join(d, name))
                with open(paths[-1], "w") as f:
                    f.write(doc if isinstance(doc, str) else json.dumps(doc))
            p = subprocess.run([sys.executable, COMPARE, *paths, *flags], capture_output=True,
                               text=True)
        return p.returncode, p.stdout.strip(), p.stderr

    def testPass(self):
        ref = Ref([[1, 2, 3, 4]] * 10)
        self.assertEqual(self.Run(ref, Ours(ref["greedy"], ref["greedy"])),
                         (0, "m prefix=1.0000 teacher=1.0000 PASS", ""))

    def testFailOnEitherBar(self):
        ref = Ref([[1, 2, 3, 4]] * 10)
        forced = [[1, 2, 3, 4]] * 9 + [[1, 2, 3, 0]]  # teacher 39/40 = 0.975
        rc, out, _ = self.Run(ref, Ours(ref["greedy"], forced))
        self.assertEqual((rc, out), (1, "m prefix=1.0000 teacher=0.9750 FAIL"))
        rc, out, _ = self.Run(ref, Ours(ref["greedy"], forced), "--min-teacher", "0.97")
        self.assertEqual((rc, out), (0, "m prefix=1.0000 teacher=0.9750 PASS"))
        greedy = [[1, 2, 3, 4]] * 9 + [[0, 2, 3, 4]]  # prefix 0.9
        rc, out, _ = self.Run(ref, Ours(greedy, ref["greedy"]), "--min-prefix", "0.95")
        self.assertEqual((rc, out), (1, "m prefix=0.9000 teacher=1.0000 FAIL"))

    def testMalformedExitsOneWithMessage(self):
        ref = Ref([[1, 2]])
        for ours in ("{not json", {"greedy": [[1, 2]]}):
            rc, out, err = self.Run(ref, ours)
            self.assertEqual((rc, out), (1, ""))
            self.assertIn("compare: malformed input:", err)


if __name__ == "__main__":
    unittest.main()
