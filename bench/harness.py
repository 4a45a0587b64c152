#!/usr/bin/python3
"""Sluice beside llama.cpp on one GPU machine: the runs behind bench/run.sh.

Pure python3 standard library (the GPU machine has nothing else). Writes the
benchmark models with mkmodel once (reused across arena sizes and later
calls), runs `generate --json` at each arena fraction, llama-bench at the
matching placements on the same files (flash attention off and on, the
better kept), optionally decode after a prompt of each --depths (both
programs), and writes OUT/results.json (format: docs/BENCHMARKS.md,
"results.json"). Usage: see bench/run.sh.
"""
import argparse
import json
import os
import platform
import re
import sys

import harness_batched
from harness_common import csv, llama_tool, log, ncmoe_for, now, run

# Layer shape of each named mkmodel shape (mkmodel.cc BenchShape; --n-layer
# overrides the block count). Only what the report needs: the PCIe ceiling
# and llama.cpp's -ncmoe placement.
SHAPES = {
    "bench35": {"n_expert": 256, "n_expert_used": 8, "n_layer": 8},
    "bench397": {"n_expert": 512, "n_expert_used": 10, "n_layer": 8},
    # deepseek2 with Kimi-K2's layers (issue 23): one dense lead block, then
    # MoE blocks of ~9.5 GB each at Q4_K. Five blocks (~38 GB): four MoE
    # blocks let llama.cpp's -ncmoe place 25% of the experts on the GPU.
    "kimi_k2": {"n_expert": 384, "n_expert_used": 8, "n_layer": 5, "arch": "deepseek2",
                "n_dense_lead": 1},
    # The CPU self-tests of the harness (bench/harness_cli_test.sh).
    "micro": {"n_expert": 8, "n_expert_used": 2, "n_layer": 4},
    "ds2_micro": {"n_expert": 16, "n_expert_used": 4, "n_layer": 3, "arch": "deepseek2",
                  "mkmodel_shape": "micro", "n_dense_lead": 1},
}
DEFAULT_MIX = {"bench35": "q4_k_m", "bench397": "ud_q1_0", "kimi_k2": "q4_k_m",
               "micro": "q4_k_m", "ds2_micro": "q4_k_m"}


def machine_info(args):
    info = {"hostname": platform.node(), "cpus": os.cpu_count(),
            "kernel": platform.release(), "date_utc": now().strftime("%Y-%m-%dT%H:%M:%SZ")}
    try:
        with open("/proc/meminfo") as f:
            info["mem_total_kb"] = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            info["cpu"] = m.group(1) if m else ""
    except OSError:
        pass
    rc, out, _, _ = run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                         "--format=csv,noheader"], 30) if _has("nvidia-smi") else (1, "", "", 0)
    if rc == 0:
        info["gpu"] = out.strip()
    commit = args.commit
    if not commit:
        rc, out, _, _ = run(["git", "rev-parse", "HEAD"], 30) if _has("git") else (1, "", "", 0)
        commit = out.strip() if rc == 0 else "unknown"
    info["commit"] = commit
    return info


def _has(tool):
    return any(os.access(os.path.join(d, tool), os.X_OK)
               for d in os.environ.get("PATH", "").split(os.pathsep))


def model_specs(args):
    for shape in args.shapes:
        if shape not in SHAPES:
            sys.exit(f"harness: unknown shape {shape!r} (one of {', '.join(SHAPES)})")
        mix = args.mix or DEFAULT_MIX[shape]
        n_layer = args.n_layer or SHAPES[shape]["n_layer"]
        for loc in args.locality:
            name = f"{shape}-{mix}-l{n_layer}-loc{loc:g}"
            yield {"shape": shape, "mix": mix, "locality": loc, "n_layer": n_layer,
                   "n_expert": SHAPES[shape]["n_expert"],
                   "n_expert_used": SHAPES[shape]["n_expert_used"],
                   "arch": SHAPES[shape].get("arch", "qwen35moe"),
                   "mkmodel_shape": SHAPES[shape].get("mkmodel_shape", shape),
                   "n_dense_lead": SHAPES[shape].get("n_dense_lead", 0),
                   "name": name, "path": os.path.join(args.models, name + ".gguf")}


def write_model(args, spec):
    """Writes spec's GGUF unless a finished one with the same flags exists."""
    cmd = [os.path.join(args.bundle, "bin", "mkmodel"), "--shape", spec["mkmodel_shape"],
           "--mix", spec["mix"], "--routing-locality", f"{spec['locality']:g}",
           "--n-layer", str(spec["n_layer"]), "--out", spec["path"]]
    if spec["arch"] != "qwen35moe":
        cmd[1:1] = ["--arch", spec["arch"]]
    stamp = spec["path"] + ".stamp.json"
    if os.path.exists(spec["path"]) and os.path.exists(stamp):
        with open(stamp) as f:
            done = json.load(f)
        if done.get("cmd") == cmd[1:]:
            log(f"reusing {spec['path']}")
            return done
    os.makedirs(args.models, exist_ok=True)
    rc, out, err, secs = run(cmd, args.timeout)
    if rc != 0:
        return {"cmd": cmd[1:], "ok": False, "error": (err or out)[-2000:]}
    routing = next((l for l in out.splitlines() if l.startswith("routing:")), "")
    done = {"cmd": cmd[1:], "ok": True, "routing": routing, "seconds": round(secs, 1),
            "bytes": os.path.getsize(spec["path"])}
    with open(stamp, "w") as f:
        json.dump(done, f)
    return done


def sluice_runs(args, spec):
    """generate --json at every fraction (the issue's prompt), then at each
    depth > 0 (a prompt of that many tokens before the timed decode) for the
    fractions in --depth-fractions."""
    rows = []
    for routing in args.routings:
        rows += [sluice_run(args, spec, frac, policy, 0, routing)
                 for frac, policy in runs_for(args)]
        for depth in (d for d in args.depths if d > 0):
            rows += [sluice_run(args, spec, frac, policy, depth, routing)
                     for frac, policy in runs_for(args) if frac in args.depth_fractions]
    return rows


def sluice_run(args, spec, frac, policy, depth, routing="router"):
    prompt = depth or args.prompt
    cmd = [os.path.join(args.bundle, "bin", "generate"), "--model", spec["path"],
           "--device", args.device, "--json", "--ignore_eos",
           "--prompt_tokens", str(prompt), "--max_tokens", str(args.gen),
           "--warmup_tokens", str(args.warmup), "--threads", str(args.threads),
           "--ctx", str(prompt + args.gen + 16),
           "--expert_policy", args.policy,
           # Decode tokens are sampled nearly uniformly (a very high
           # temperature): a greedy synthetic model repeats itself, which
           # would route every token to the same experts and flatter the
           # cache. Results say which.
           "--temperature", f"{args.decode_temperature:g}", "--seed", "1"]
    # 100% is "every expert resident" (no cache) unless asked to stream
    # it through a full-size arena.
    mode = "resident" if frac >= 1 and not args.cache_at_full else "cache"
    if mode == "cache":
        cmd += ["--expert_arena_fraction", f"{frac:g}",
                "--expert_miss_policy", policy]
        if policy != "copy":
            mode = f"cache, {policy} misses"
    if args.prefetch:
        cmd.append("--expert_prefetch")
    if args.no_prefetch:
        cmd.append("--expert_prefetch=false")
    if args.host_tier_bytes:
        cmd += ["--host_tier_bytes", str(args.host_tier_bytes)]
    if routing != "router":
        # Experts chosen by a trace, not the router (tools/routing_flag.h):
        # the row says which.
        cmd += ["--routing", routing, "--routing_seed", "1"]
        mode += f", {routing} routing"
    trace = ""
    if args.record_trace and mode == "resident" and spec["locality"] > 0 and depth == 0:
        # The routing trace of the projection (docs/BENCHMARKS.md): small
        # (tokens x layers x k ids), so it travels back under --out.
        trace = os.path.join(args.out, "traces", spec["name"] + ".trace")
        os.makedirs(os.path.dirname(trace), exist_ok=True)
        cmd += ["--record_trace", trace]
    rc, out, err, secs = run(cmd, args.timeout)
    row = {"model": spec["name"], "shape": spec["shape"], "mix": spec["mix"],
           "locality": spec["locality"], "fraction": frac, "mode": mode,
           "miss_policy": policy if mode != "resident" else "copy", "depth": depth,
           "routing": routing,
           "cmd": cmd[1:], "seconds": round(secs, 1), "ok": False}
    if trace:
        row["trace"] = trace
    line = out.strip().splitlines()[-1] if out.strip() else ""
    if rc == 0 and line.startswith("{"):
        row["ok"] = True
        row["result"] = json.loads(line)
    else:
        row["error"] = f"rc={rc}: " + (err or out)[-2000:]
    log(f"{spec['name']} arena {frac:g} {mode}" + (f" at depth {depth}" if depth else "") + ": " + (
        f"decode {row['result']['decode_tok_s']:.1f} tok/s, prompt "
        f"{row['result']['prefill_tok_s']:.1f} tok/s" if row["ok"] else row["error"][:300]))
    return row


def runs_for(args):
    """(fraction, miss policy) pairs: every policy at each streamed fraction,
    one run where every expert is resident."""
    out = []
    for frac in args.fractions:
        resident = frac >= 1 and not args.cache_at_full
        for policy in (["copy"] if resident else args.miss_policies):
            out.append((frac, policy))
    return out


def llama_runs(args, spec):
    """llama-bench with flash attention off and on (-fa 0,1; the better of
    the two is kept per placement and test): all on the GPU and at each
    fraction's -ncmoe in one process, then -ngl 0; then, for the
    --depth-fractions placements at each depth > 0, decode only (-p 0 -d
    depth) and the prompt of that many tokens alone (-p depth -n 0: what
    Sluice's prefill before its decode at that depth does), one row per
    placement and depth."""
    bench, env = llama_tool(args, "llama-bench")
    ncmoe = sorted({ncmoe_for(spec, f) for f in args.fractions})
    common = ["-m", spec["path"], "-r", str(args.llama_reps),
              "-t", str(args.threads), "-fa", "0,1", "-o", "json"]
    gen = ["-n", str(args.gen)]
    plans = [gen + ["-p", str(args.prompt), "-ngl", "99", "-ncmoe", ",".join(map(str, ncmoe))]]
    if not args.no_llama_cpu:
        plans.append(gen + ["-p", str(args.prompt), "-ngl", "0"])
    depths = [d for d in args.depths if d > 0]
    if depths:
        # The CPU placement is left out at depth: a 16k prompt on the CPU
        # alone would take most of a command's time, and Sluice has no
        # counterpart.
        deep = ["-ngl", "99", "-ncmoe", ",".join(map(str, sorted(
            {ncmoe_for(spec, f) for f in args.depth_fractions})))]
        depth_list = ",".join(map(str, depths))
        plans.append(gen + ["-p", "0", "-d", depth_list] + deep)
        plans.append(["-n", "0", "-p", depth_list] + deep)
    rows = {}
    for plan in plans:
        prompt_only = plan[:2] == ["-n", "0"]  # the prompt of each depth alone
        rc, out, err, secs = run([bench] + common + plan, args.timeout, env=env)
        if rc != 0:
            bad = {"model": spec["name"], "shape": spec["shape"], "mix": spec["mix"],
                   "locality": spec["locality"], "ok": False, "args": plan,
                   "depth": depths[0] if "-d" in plan or prompt_only else 0,
                   "error": f"rc={rc}: " + (err or out)[-2000:]}
            rows[("failed", len(rows))] = bad
            log(f"llama-bench failed: {bad['error'][:300]}")
            continue
        merge_llama_rows(rows, parse_llama(out, spec, plan, prompt_is_depth=prompt_only))
    return list(rows.values())


def merge_llama_rows(rows, new):
    """Adds parse_llama's rows to `rows` (keyed by placement and depth),
    joining a depth's decode and prompt figures into one row."""
    for r in new:
        k = (r["n_gpu_layers"], r["n_cpu_moe"], r["depth"])
        if k in rows:
            rows[k].update({f: v for f, v in r.items() if f not in rows[k] or f.startswith("prompt")})
        else:
            rows[k] = r


def flash_attn(test):
    """llama-bench's flash_attn field: 0 off, 1 on, -1 auto (an int since
    the flash-attention type became an enum; a bool before)."""
    return int(test.get("flash_attn", 0))


def parse_llama(out, spec, plan, prompt_is_depth=False):
    """One row per placement (ngl, ncmoe) and depth: prompt and decode
    tok/s (fastest repetition) for each flash-attention setting as
    *_tok_s_fa0 / *_tok_s_fa1, the better of them as prompt_tok_s /
    decode_tok_s, and which one that was as prompt_fa / decode_fa. With
    prompt_is_depth (a run of prompts alone, -n 0), a prompt of N tokens
    is the row of depth N."""
    start = out.find("[")
    tests = json.loads(out[start:]) if start >= 0 else []
    by_place = {}
    for t in tests:
        ngl, ncm, depth = t.get("n_gpu_layers", 0), t.get("n_cpu_moe", 0), t.get("n_depth", 0)
        if prompt_is_depth:
            depth = t.get("n_prompt", 0)
        row = by_place.setdefault((ngl, ncm, depth), {
            "model": spec["name"], "shape": spec["shape"], "mix": spec["mix"],
            "locality": spec["locality"], "ok": True, "n_gpu_layers": ngl, "n_cpu_moe": ncm,
            "placement": ("cpu" if ngl == 0 else "all_gpu" if ncm == 0 else "ncmoe"),
            "gpu_expert_fraction": (0.0 if ngl == 0 else 1 - min(ncm, spec["n_layer"]) / spec["n_layer"]),
            "depth": depth, "args": plan})
        if t.get("n_prompt", 0) > 0 and t.get("n_gen", 0) == 0:
            test = "prompt"
        elif t.get("n_gen", 0) > 0 and t.get("n_prompt", 0) == 0:
            test = "decode"
        else:
            continue
        fa = flash_attn(t)
        suffix = f"fa{fa}" if fa >= 0 else "fa_auto"
        best = max(t.get("samples_ts") or [t.get("avg_ts", 0)])
        row[f"{test}_tok_s_{suffix}"] = best
        row[f"{test}_tok_s_avg_{suffix}"] = t.get("avg_ts")
        if best > row.get(f"{test}_tok_s", -1):
            row[f"{test}_tok_s"] = best
            row[f"{test}_tok_s_avg"] = t.get("avg_ts")
            row[f"{test}_fa"] = fa
        for k in ("build_commit", "cpu_info", "gpu_info", "n_threads", "model_size", "model_n_params"):
            if k in t:
                row[k] = t[k]
    return list(by_place.values())


# The CMake settings that say how llama.cpp was built for the comparison
# (the brief's: native CPU code, the CUDA architecture, the flash-attention
# kernels), in this order.
CMAKE_FLAGS = ("CMAKE_BUILD_TYPE", "GGML_NATIVE", "GGML_CUDA", "CMAKE_CUDA_ARCHITECTURES",
               "GGML_CUDA_FA", "GGML_CUDA_FA_ALL_QUANTS")


def flags_from_cmake_cache(path):
    """-DNAME=VALUE for each of CMAKE_FLAGS set in a CMakeCache.txt, or ""."""
    if not os.path.exists(path):
        return ""
    found = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"([A-Z0-9_]+):[A-Z]+=(.*)$", line.strip())
            if m and m.group(1) in CMAKE_FLAGS:
                found[m.group(1)] = m.group(2)
    return " ".join(f"-D{k}={found[k]}" for k in CMAKE_FLAGS if k in found)


def kernel_switches(environ):
    """The SLUICE_CUDA_* kernel switches set in `environ` (docs/CUDA_KERNELS.md,
    "Switches"), sorted by name: generate inherits them, so a run's figures
    say which launch shapes they measured."""
    return {k: environ[k] for k in sorted(environ) if k.startswith("SLUICE_CUDA_")}


def llama_flags(args):
    """--llama-flags, else the FLAGS file build_llama.sh leaves beside
    llama-bench, else the build's CMakeCache.txt (the folder above bin/)."""
    if args.llama_flags or not args.llama:
        return args.llama_flags
    path = os.path.join(args.llama, "FLAGS")
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return flags_from_cmake_cache(
        os.path.join(os.path.dirname(os.path.abspath(args.llama)), "CMakeCache.txt"))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, help="results folder (results.json, log)")
    ap.add_argument("--bundle", default="bundle", help="folder with bin/generate, bin/mkmodel")
    ap.add_argument("--models", default="/tmp/sluice-bench-models",
                    help="where the GGUF files are written and reused (not under --out)")
    ap.add_argument("--shapes", type=csv, default=["bench35", "bench397"])
    ap.add_argument("--mix", default="", help="one mix for every shape (default per shape: "
                    + ", ".join(f"{k} {v}" for k, v in DEFAULT_MIX.items()) + ")")
    ap.add_argument("--locality", type=lambda s: csv(s, float), default=[0.0, 0.2])
    ap.add_argument("--fractions", type=lambda s: csv(s, float), default=[1.0, 0.5, 0.25, 0.1])
    ap.add_argument("--routings", type=csv, default=["router"],
                    help="Sluice's routing per run: router (the model's own), realistic[:...], "
                    "uniform, zipf:S, trace:FILE (generate --routing); each is a row")
    ap.add_argument("--n-layer", type=int, default=0, help="blocks (default 8)")
    ap.add_argument("--depths", type=lambda s: csv(s, int), default=[0],
                    help="context depths of the decode runs, e.g. 0,4096,16384: Sluice "
                    "decodes after a prompt of that many tokens, llama-bench with -d")
    ap.add_argument("--depth-fractions", type=lambda s: csv(s, float), default=[1.0, 0.25],
                    help="arena fractions (and llama.cpp's matching placements) decoded "
                    "at each depth > 0")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=8, help="unmeasured tokens first")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--policy", default="lru")
    ap.add_argument("--decode-temperature", type=float, default=10000.0,
                    help="sampling temperature of the generated tokens (default: "
                    "nearly uniform random tokens, the cache's honest case; 0: greedy)")
    ap.add_argument("--prefetch", action="store_true")
    ap.add_argument("--no-prefetch", action="store_true",
                    help="--expert_prefetch=false")
    ap.add_argument("--miss-policies", type=csv, default=["copy"],
                    help="where decode misses are computed, one run each: copy, host, cost")
    ap.add_argument("--host-tier-bytes", type=int, default=0)
    ap.add_argument("--cache-at-full", action="store_true",
                    help="run 100%% through the slot cache instead of all resident")
    ap.add_argument("--record-trace", action="store_true",
                    help="record a routing trace (generate --record_trace) in the all-resident "
                    "run of every model with locality > 0, under OUT/traces")
    ap.add_argument("--llama", default="", help="folder with llama-bench and its libraries")
    ap.add_argument("--llama-reps", type=int, default=2)
    ap.add_argument("--llama-flags", default="",
                    help="how llama.cpp was built (its cmake flags), recorded in settings "
                    "(default: the FLAGS file beside llama-bench, if any)")
    ap.add_argument("--llama-localities", type=lambda s: csv(s, float), default=None,
                    help="localities llama.cpp runs on (default: the first; its speed "
                    "does not depend on routing)")
    ap.add_argument("--no-llama-cpu", action="store_true", help="skip llama.cpp -ngl 0")
    ap.add_argument("--batched", type=lambda s: csv(s, int), default=[],
                    help="sequences decoding at once, e.g. 1,4,8,16,32,64 (harness_batched.py; "
                    "needs bin/batch_decode and llama-batched-bench); none by default")
    ap.add_argument("--batched-fractions", type=lambda s: csv(s, float), default=[1.0, 0.25])
    ap.add_argument("--batched-prompt", type=int, default=128, help="prompt of each sequence")
    ap.add_argument("--batched-gen", type=int, default=32, help="decode steps timed")
    ap.add_argument("--only", choices=["all", "sluice", "llama", "models"], default="all")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per command")
    ap.add_argument("--commit", default="", help="Sluice commit (default: git rev-parse)")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    args.llama_flags = llama_flags(args)
    llama_locs = args.llama_localities if args.llama_localities is not None else args.locality[:1]
    results = {"format": 1, "machine": machine_info(args),
               "settings": {**vars(args), "kernel_switches": kernel_switches(os.environ)},
               "models": [],
               "sluice": [], "llama": [], "batched": {"sluice": [], "llama": []}}
    path = os.path.join(args.out, "results.json")
    for spec in model_specs(args):
        made = write_model(args, spec)
        results["models"].append({**spec, **made})
        if not made.get("ok", False):
            log(f"mkmodel failed for {spec['name']}: {made.get('error', '')[:300]}")
            continue
        if args.only in ("all", "sluice"):
            results["sluice"].extend(sluice_runs(args, spec))
            if args.batched:
                results["batched"]["sluice"].extend(harness_batched.sluice_batched(args, spec))
        if args.llama and args.only in ("all", "llama") and spec["locality"] in llama_locs:
            results["llama"].extend(llama_runs(args, spec))
            if args.batched:
                results["batched"]["llama"].extend(harness_batched.llama_batched(args, spec))
        # Written after every model, so a command cut short keeps what ran.
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
