"""The batched runs of bench/harness.py (issue 19): many sequences decoding
at once, Sluice's batch_decode beside llama.cpp's llama-batched-bench on the
same file and placement.

For each model and each --batched-fractions placement: `batch_decode
--sequences S1,S2,...` (one JSON line per batch size: aggregate decode tok/s
and the step time, which is every stream's time between tokens), and
`llama-batched-bench -npl S1,S2,...` with flash attention off and on at the
matching -ncmoe (its S_TG column, decode tok/s of all sequences together).
Rows go to results.json "batched": {"sluice": [...], "llama": [...]}.
"""
import json
import os

from harness_common import llama_tool, log, ncmoe_for, run


def sluice_batched(args, spec):
    rows = []
    for frac in args.batched_fractions:
        cmd = [os.path.join(args.bundle, "bin", "batch_decode"), "--model", spec["path"],
               "--backend", args.device, "--sequences", ",".join(map(str, args.batched)),
               "--prompt_tokens", str(args.batched_prompt),
               "--decode_tokens", str(args.batched_gen), "--threads", str(args.threads),
               "--json"]
        if frac < 1:
            cmd += ["--expert_slots", "-1", "--expert_arena_fraction", f"{frac:g}",
                    "--expert_miss_policy", "copy", "--expert_policy", args.policy]
        base = {"model": spec["name"], "shape": spec["shape"], "mix": spec["mix"],
                "locality": spec["locality"], "fraction": frac}
        rc, out, err, _ = run(cmd, args.timeout)
        got = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        if rc != 0 or not got:
            rows.append({**base, "ok": False, "error": f"rc={rc}: " + (err or out)[-2000:]})
            log(f"batch_decode failed: {rows[-1]['error'][:300]}")
            continue
        for g in got:
            rows.append({**base, "ok": True, "sequences": g["sequences"],
                         "decode_tok_s": g["decode_tok_s"],
                         "step_ms_median": g.get("step_ms_median"),
                         "step_ms_p99": g.get("step_ms_p99"),
                         "experts_per_layer_step": g.get("experts_per_layer_step")})
    return rows


def parse_batched_bench(out):
    """{B: S_TG} from llama-batched-bench's table (| PP | TG | B | N_KV |
    T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |)."""
    got = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 10:
            continue
        try:
            got[int(cells[2])] = float(cells[7])
        except ValueError:
            continue  # the header and its rule
    return got


def llama_batched(args, spec):
    bench, env = llama_tool(args, "llama-batched-bench")
    ctx = max(args.batched) * (args.batched_prompt + args.batched_gen) + 256
    rows = []
    for frac in args.batched_fractions:
        ncmoe = ncmoe_for(spec, frac)
        by_fa = {}
        for fa in (0, 1):
            cmd = [bench, "-m", spec["path"], "-ngl", "99", "-fa", str(fa), "-c", str(ctx),
                   "-npp", str(args.batched_prompt), "-ntg", str(args.batched_gen),
                   "-npl", ",".join(map(str, args.batched)), "-t", str(args.threads)]
            if ncmoe:
                cmd += ["-ncmoe", str(ncmoe)]
            rc, out, err, _ = run(cmd, args.timeout, env=env)
            by_fa[fa] = parse_batched_bench(out) if rc == 0 else {}
            if rc != 0:
                log(f"llama-batched-bench -fa {fa} failed: {(err or out)[-300:]}")
        for b in args.batched:
            off, on = by_fa[0].get(b), by_fa[1].get(b)
            best = max((v for v in (off, on) if v is not None), default=None)
            rows.append({"model": spec["name"], "shape": spec["shape"], "mix": spec["mix"],
                         "locality": spec["locality"], "fraction": frac, "n_cpu_moe": ncmoe,
                         "sequences": b, "ok": best is not None, "decode_tok_s": best,
                         "decode_tok_s_fa0": off, "decode_tok_s_fa1": on})
    return rows
