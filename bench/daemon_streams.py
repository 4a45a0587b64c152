#!/usr/bin/python3
"""Many clients at once through the whole daemon (issue 19).

One sluiced with one worker; for each N of --streams, N concurrent
`sluicectl generate` streams of --tokens tokens each (sampled, end of text
ignored), then as many OpenAI clients (`POST /v1/completions` with
"stream": true, read to the end), then the worker's batch metrics. Prints per N: the wall time for
all N streams, the aggregate tok/s (N x tokens / wall), the streams' own
times (min / median / max) and how many failed. With --long_prompt_words W,
one more round per N: N `sluicectl --json` streams timing every token as it
arrives, and, once they all stream, one request with a prompt of W words
(issue 19: a 4,096-token prompt admitted beside running streams); prints the
streams' inter-token gaps, median and p99, over the whole round and while the
long prompt was being evaluated (issue 19's target: p99 <= 3x the median). Python standard library only
(the GPU machine has nothing else). Usage:

  bench/daemon_streams.py --bin BIN_DIR --model MODEL --streams 1,8,32 \\
      --tokens 128 -- [sluiced flags, e.g. --backend=cuda]

BIN_DIR holds sluiced, sluice-worker and sluicectl (tools/gpu_bundle.sh's
bin/, or bazel-bin's three folders linked into one).
"""
import argparse
import concurrent.futures
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import json
import urllib.request

METRICS = ("sluice_worker_batch_steps_total", "sluice_worker_max_sequences",
           "sluice_worker_kv_blocks", "sluice_worker_preemptions_total",
           "sluice_worker_state_resident_bytes", "sluice_worker_experts_acquired_total")


def wait_for(what, check, seconds):
    end = time.time() + seconds
    while time.time() < end:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    sys.exit(f"daemon_streams: {what} did not happen in {seconds} s")


def start_daemon(bin_dir, model, flags, load_timeout_s):
    """A sluiced serving `model`, ready: (process, ports {grpc, metrics, http},
    the sluicectl command line that reaches it)."""
    work = tempfile.mkdtemp()
    ports = os.path.join(work, "ports")
    log = open(os.path.join(work, "sluiced.log"), "w")
    daemon = subprocess.Popen(
        [os.path.join(bin_dir, "sluiced"), f"--model={model}", "--grpc_address=127.0.0.1:0",
         "--metrics_address=127.0.0.1:0", "--http_address=127.0.0.1:0", f"--port_file={ports}",
         f"--worker_binary={os.path.join(bin_dir, 'sluice-worker')}", "--cgroup_mode=none",
         "--queue_limit=1000"] + flags, stdout=log, stderr=subprocess.STDOUT)

    def read_ports():
        if not os.path.exists(ports):
            return None
        kv = dict(l.strip().split("=", 1) for l in open(ports) if "=" in l)
        return kv if all(k in kv for k in ("grpc", "metrics", "http")) else None
    kv = wait_for("the port file", read_ports, 60)
    ctl = [os.path.join(bin_dir, "sluicectl"), f"--addr=127.0.0.1:{kv['grpc']}"]

    def ready():
        if daemon.poll() is not None:
            sys.exit("daemon_streams: sluiced exited:\n" + open(log.name).read()[-3000:])
        r = subprocess.run(ctl + ["models"], capture_output=True, text=True)
        return "READY" in r.stdout
    wait_for("the model load", ready, load_timeout_s)
    return daemon, kv, ctl


STEADY = 20


def gaps_round(ctl, n, tokens, long_words):
    """N timed streams and one long prompt among them, sent once every
    stream has run STEADY tokens (streams that are running, not starting):
    (all gaps, gaps while the long prompt ran, its prompt tokens, its
    seconds)."""
    arrivals = [[] for _ in range(n)]
    started = threading.Barrier(n + 1)

    def stream(i):
        proc = subprocess.Popen(ctl + ["generate", f"timed stream {i}", f"--max_tokens={tokens}",
                                       "--ignore_eos", "--temperature=0.7", f"--seed={i + 1}",
                                       "--json"], stdout=subprocess.PIPE, text=True)
        waiting = True
        for line in proc.stdout:
            if '"chunk"' in line:
                arrivals[i].append(time.time())
                if waiting and len(arrivals[i]) >= STEADY:
                    waiting = False
                    started.wait()
        proc.wait()
        if waiting:
            started.abort()

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    started.wait(timeout=600)
    long_text = " ".join(f"word{i % 97}" for i in range(long_words))
    t0 = time.time()
    r = subprocess.run(ctl + ["generate", long_text, "--max_tokens=1", "--ignore_eos"],
                       capture_output=True, text=True)
    t1 = time.time()
    for t in threads:
        t.join()
    m = re.search(r"prompt_tokens=(\d+)", r.stderr)
    if m is None:
        print(f"  the long prompt failed: {r.stderr.strip()[-300:]}", flush=True)
    every, during = [], []
    for times in arrivals:
        for a, b in zip(times, times[1:]):
            every.append(b - a)
            if b > t0 and a < t1:
                during.append(b - a)
    return every, during, (int(m.group(1)) if m else -1), t1 - t0


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--streams", default="1,8,32")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--load_timeout_s", type=int, default=600)
    p.add_argument("--long_prompt_words", type=int, default=0)
    p.add_argument("sluiced_flags", nargs="*")
    a = p.parse_args()
    daemon, kv, ctl = start_daemon(a.bin, a.model, a.sluiced_flags, a.load_timeout_s)
    try:
        subprocess.run(ctl + ["generate", "warm up", "--max_tokens=8", "--ignore_eos"],
                       capture_output=True, check=True)

        def one(i, n):
            start = time.time()
            r = subprocess.run(ctl + ["generate", f"stream {i} of {n}: once upon a time",
                                      f"--max_tokens={a.tokens}", "--ignore_eos",
                                      "--temperature=0.7", f"--seed={i + 1}"],
                               capture_output=True, text=True)
            return time.time() - start, r.returncode

        def openai(i, n):
            start = time.time()
            body = json.dumps({"prompt": f"client {i} of {n}: once upon a time",
                               "max_tokens": a.tokens, "ignore_eos": True, "temperature": 0.7,
                               "seed": i + 1, "stream": True}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{kv['http']}/v1/completions",
                                         data=body, headers={"content-type": "application/json"})
            try:
                chunks = 0
                with urllib.request.urlopen(req, timeout=600) as r:
                    for line in r:
                        chunks += line.startswith(b"data: {")
                return time.time() - start, 0 if chunks > 0 else 1
            except OSError:
                return time.time() - start, 1

        for n in (int(x) for x in a.streams.split(",")):
            for name, client in (("sluicectl", one), ("openai", openai)):
                start = time.time()
                with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
                    results = list(pool.map(lambda i: client(i, n), range(n)))
                wall = time.time() - start
                times = sorted(t for t, _ in results)
                failed = sum(1 for _, rc in results if rc != 0)
                print(f"{name} streams={n} tokens_each={a.tokens} wall_s={wall:.2f} "
                      f"aggregate_tok_s={n * a.tokens / wall:.1f} stream_s min/median/max="
                      f"{times[0]:.2f}/{statistics.median(times):.2f}/{times[-1]:.2f} "
                      f"failed={failed}", flush=True)
            if a.long_prompt_words > 0:
                every, during, long_tokens, long_s = gaps_round(ctl, n, a.tokens,
                                                                a.long_prompt_words)
                med = statistics.median(every) if every else float("nan")
                print(f"gaps streams={n} long_prompt_tokens={long_tokens} long_prompt_s={long_s:.2f} "
                      f"gap_ms median={1e3 * med:.2f} p99={1e3 * pct(every, 0.99):.2f} "
                      f"during_long_prompt median={1e3 * pct(during, 0.5):.2f} "
                      f"p99={1e3 * pct(during, 0.99):.2f} max={1e3 * max(during or [0]):.2f} "
                      f"p99_over_median={pct(every, 0.99) / med:.2f}", flush=True)
            text = urllib.request.urlopen(
                f"http://127.0.0.1:{kv['metrics']}/metrics", timeout=10).read().decode()
            for line in text.splitlines():
                if line.startswith(METRICS):
                    print("  " + line)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)


if __name__ == "__main__":
    main()
