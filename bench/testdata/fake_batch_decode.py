#!/usr/bin/env python3
# A stand-in for batch_decode in bench/batch_ab_test.py: one JSON line a
# number of sequences, decode tok/s = 100 x sequences (10% more with
# FAKE_FAST=1); appends its arm (FAKE_ARM) and arguments to FAKE_LOG; exits
# 3 with FAKE_FAIL=1.
import json
import os
import sys
a = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(os.environ.get("FAKE_ARM", "-") + " " + " ".join(a) + "\n")
if os.environ.get("FAKE_FAIL") == "1":
    sys.stderr.write("fake failure\n")
    sys.exit(3)
print("batch_decode: fit plan (not JSON)")
for s in (int(x) for x in a[a.index("--sequences") + 1].split(",")):
    rate = 100.0 * s * (1.1 if os.environ.get("FAKE_FAST") == "1" else 1.0)
    print(json.dumps({"sequences": s, "steps": 32, "decode_tok_s": rate}))
