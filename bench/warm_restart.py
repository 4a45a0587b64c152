#!/usr/bin/python3
"""A warmed restart's first token against a warm worker's (issue 22).

Round 1: sluiced with --expert_profile=PROFILE (no file yet) serves
--requests generations of one prompt length, each prompt different: the
first is cold (empty slot cache and host tier), the later ones warm; SIGTERM
saves the usage profile. Round 2: sluiced again with the same profile, which
warms the arena and the host tier at load; its first request is the warmed
restart, then as many warm ones. Prints each request's time to first token
(the daemon's own, GenerateDone.timings) and the ratio of the warmed
restart's to the warm median. Python standard library only. Usage:

  bench/warm_restart.py --bin BIN_DIR --model MODEL [--profile PATH] \\
      [--prompt_words 300] [--requests 4] -- [sluiced flags]
"""
import argparse
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile

from daemon_streams import start_daemon

WORDS = ("river stone lantern quiet orbit harbor meadow copper signal winter "
         "garden thunder paper violet engine canyon marble silver forest echo").split()


def prompt(seed, words):
    """The same multiset of words in another order for each seed: prompts of
    (nearly) one token count and one mix of tokens, so that their times
    differ by what the caches hold rather than by what they ask."""
    bag = [WORDS[i % len(WORDS)] for i in range(words)]
    random.Random(seed).shuffle(bag)
    return " ".join(bag)


def ttft_ms(ctl, text, tokens):
    r = subprocess.run(ctl + ["generate", text, f"--max_tokens={tokens}", "--ignore_eos",
                              "--temperature=0"], capture_output=True, text=True)
    m = re.search(r"prompt_tokens=(\d+) .*ttft_ms=([0-9.]+)", r.stderr)
    if r.returncode != 0 or m is None:
        sys.exit(f"warm_restart: generate failed: {r.stderr[-2000:]}")
    return int(m.group(1)), float(m.group(2))


def round_of(a, profile, first_seed, label):
    daemon, _, ctl = start_daemon(a.bin, a.model, [f"--expert_profile={profile}"] + a.flags,
                                  a.load_timeout_s)
    out = []
    try:
        for i in range(a.requests):
            n, ms = ttft_ms(ctl, prompt(first_seed + i, a.prompt_words), a.tokens)
            kind = label if i == 0 else "warm"
            print(f"{kind:15s} request {first_seed + i}: prompt_tokens={n} ttft_ms={ms:.1f}",
                  flush=True)
            out.append(ms)
    finally:
        daemon.send_signal(signal.SIGTERM)  # saves the profile
        daemon.wait(timeout=120)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--profile", default=os.path.join(tempfile.mkdtemp(), "usage.slep"))
    p.add_argument("--prompt_words", type=int, default=300)
    p.add_argument("--requests", type=int, default=4)
    p.add_argument("--tokens", type=int, default=4)
    p.add_argument("--load_timeout_s", type=int, default=600)
    p.add_argument("flags", nargs="*")
    a = p.parse_args()
    if os.path.exists(a.profile):
        os.remove(a.profile)
    first = round_of(a, a.profile, 0, "cold")
    if not os.path.exists(a.profile):
        sys.exit(f"warm_restart: no profile was saved at {a.profile}")
    print(f"profile {a.profile}: {os.path.getsize(a.profile)} bytes", flush=True)
    second = round_of(a, a.profile, a.requests, "warmed restart")
    warm = statistics.median(first[1:] + second[1:])
    print(f"cold_ttft_ms={first[0]:.1f} warm_median_ttft_ms={warm:.1f} "
          f"warmed_restart_ttft_ms={second[0]:.1f} warmed_over_warm={second[0] / warm:.2f}")


if __name__ == "__main__":
    main()
