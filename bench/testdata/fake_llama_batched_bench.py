#!/usr/bin/env python3
# A stand-in for llama-batched-bench in bench/harness_cli_test.sh: prints its
# table with made-up rates for each -npl (decode S_TG = 100 x B, halved with
# -ncmoe, 10% more with -fa 1).
import sys
a = sys.argv
pp, tg = int(a[a.index("-npp") + 1]), int(a[a.index("-ntg") + 1])
fa = int(a[a.index("-fa") + 1])
slow = 2 if "-ncmoe" in a else 1
print("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |")
print("|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|")
for b in (int(x) for x in a[a.index("-npl") + 1].split(",")):
    s_tg = 100.0 * b * (1.1 if fa else 1.0) / slow
    print(f"| {pp:5d} | {tg:6d} | {b:4d} | {b * (pp + tg):6d} | 0.100 | 1000.00 | 1.000 | {s_tg:8.2f} | 1.100 | 100.00 |")
