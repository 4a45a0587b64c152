"""What bench/harness.py and bench/harness_batched.py share: logging, the
command runner, and llama.cpp's -ncmoe for a fraction of the experts."""
import datetime
import os
import shlex
import subprocess
import sys
import time


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def log(msg):
    print(f"[{now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def csv(text, conv=str):
    return [conv(x) for x in text.split(",") if x != ""]


def run(cmd, timeout, env=None):
    """(rc, stdout, stderr, seconds); rc 124 on timeout."""
    log("$ " + " ".join(shlex.quote(c) for c in cmd))
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return 124, out, err, time.monotonic() - start


def ncmoe_for(spec, frac):
    """-ncmoe N keeping about `frac` of the expert bytes on the GPU. -ncmoe
    counts blocks from the first, so dense lead blocks (deepseek2's; no
    experts) come first in N."""
    lead = spec.get("n_dense_lead", 0)
    moe = spec["n_layer"] - lead
    k = max(0, min(moe, round(moe * (1 - frac))))
    return lead + k if k > 0 else 0


def llama_tool(args, name):
    """(path of llama.cpp's `name` under --llama, its top or bin/; the
    environment that finds its libraries)."""
    path = os.path.join(args.llama, name)
    if not os.path.exists(path):
        path = os.path.join(args.llama, "bin", name)
    env = dict(os.environ)
    libdirs = [args.llama, os.path.join(args.llama, "lib"), os.path.join(args.llama, "bin")]
    env["LD_LIBRARY_PATH"] = ":".join(libdirs + [env.get("LD_LIBRARY_PATH", "")])
    return path, env
