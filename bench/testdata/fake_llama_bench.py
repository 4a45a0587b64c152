#!/usr/bin/env python3
# A stand-in for llama-bench in bench/harness_cli_test.sh: prints made-up
# tokens/s in llama-bench's -o json shape for each -ngl / -ncmoe asked.
import json, sys
a = sys.argv
ngl = a[a.index("-ngl") + 1]
ncm = a[a.index("-ncmoe") + 1].split(",") if "-ncmoe" in a else ["0"]
out = []
for n in ncm:
    for p, g in ((int(a[a.index("-p") + 1]), 0), (0, int(a[a.index("-n") + 1]))):
        ts = 1000.0 / (1 + int(n)) if int(ngl) else 50.0
        out.append({"n_gpu_layers": int(ngl), "n_cpu_moe": int(n), "n_prompt": p, "n_gen": g,
                    "avg_ts": ts * (10 if p else 1), "samples_ts": [ts * (10 if p else 1)], "build_commit": "fake"})
print(json.dumps(out))
